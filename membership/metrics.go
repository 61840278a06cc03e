package membership

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Rejoin attempt results, the values of the result label.
const (
	resultSuccess = "success"
	resultFailure = "failure"
)

type metrics struct {
	members prometheus.Gauge
	changes prometheus.Counter
	rejoins *prometheus.CounterVec
}

func newMetrics() *metrics {
	return &metrics{
		members: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "weir_cluster_members",
			Help: "Alive cluster members this node knows of, itself included.",
		}),
		changes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_cluster_membership_changes_total",
			Help: "Membership events seen: joins, leaves and metadata updates.",
		}),
		rejoins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_cluster_rejoin_attempts_total",
			Help: "Attempts to join seeds, at start and then whenever a seed is not an alive member, by result.",
		}, []string{"result"}),
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.members, m.changes, m.rejoins}
}

// register registers every collector on reg, or none. A nil reg registers
// nothing.
func (m *metrics) register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	var done []prometheus.Collector
	for _, c := range m.collectors() {
		if err := reg.Register(c); err != nil {
			for _, d := range done {
				reg.Unregister(d)
			}
			return fmt.Errorf("membership: registering metrics: %w", err)
		}
		done = append(done, c)
	}
	m.rejoins.WithLabelValues(resultSuccess)
	m.rejoins.WithLabelValues(resultFailure)
	return nil
}

func (m *metrics) unregister(reg prometheus.Registerer) {
	if reg == nil {
		return
	}
	for _, c := range m.collectors() {
		reg.Unregister(c)
	}
}
