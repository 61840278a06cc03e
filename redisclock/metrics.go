package redisclock

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	offset     prometheus.Gauge
	rtt        prometheus.Gauge
	syncErrors prometheus.Counter
	steps      *prometheus.CounterVec // by direction: forward, backward
	lastStep   prometheus.Gauge
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
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_redis_clock_steps_total",
			Help: "Resyncs that moved the offset by more than the step threshold plus their samples' error: the time base changed (a failover to a server with another clock, or the server's clock was set), by direction.",
		}, []string{"direction"}),
		lastStep: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "weir_redis_clock_last_step_seconds",
			Help: "Size of the last time-base step (new offset minus old; negative: the new base is behind).",
		}),
	}
	m.steps.WithLabelValues("forward") // both show from the start, at 0
	m.steps.WithLabelValues("backward")
	if reg == nil {
		return m, nil
	}
	cs := []prometheus.Collector{m.offset, m.rtt, m.syncErrors, m.steps, m.lastStep}
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
