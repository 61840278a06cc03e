package redisclock

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	offset     prometheus.Gauge
	rtt        prometheus.Gauge
	syncErrors prometheus.Counter
}

// newMetrics builds the Clock's metrics and registers them on reg (nil:
// none), undoing its own registrations on failure.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		offset: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "weir_redis_clock_offset_seconds",
			Help: "Redis server time minus this node's clock, as last measured.",
		}),
		rtt: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "weir_redis_clock_rtt_seconds",
			Help: "Round trip of the TIME sample that set the offset; the offset is off by at most half of it.",
		}),
		syncErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_redis_clock_sync_errors_total",
			Help: "Resamples in which no TIME command succeeded; the last offset was kept.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	cs := []prometheus.Collector{m.offset, m.rtt, m.syncErrors}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return nil, fmt.Errorf("redisclock: register metrics: %w", err)
		}
	}
	return m, nil
}
