package forward

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	ringChanges prometheus.Counter
	notOwner    prometheus.Counter
	rejoins     prometheus.Counter
	// forwardTimeouts counts forwards that ended without an answer by
	// whom budget.go blamed: owner, caller, local_stall or silent.
	forwardTimeouts *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		ringChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_ring_changes_total", Help: "Membership changes applied to the ownership ring.",
		}),
		notOwner: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_forward_not_owner_total", Help: "Forwards answered by a node that no longer owned the group (retried at the owner it named).",
		}),
		rejoins: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_rejoins_total", Help: "Times this node rejoined after seeing at most half of the cluster (the small side of a split); each time it reloaded its in-memory state from Redis.",
		}),
		forwardTimeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_forward_timeouts_total",
			Help: "Forwards to an owner that ended without an answer, by blame: owner (its latency budget ran out; counts against its breaker), caller (the caller's deadline bounded the wait), local_stall (this node was descheduled past the deadline), silent (the caller's deadline bounded the wait, but the owner has answered nothing for the silence limit; counts against its breaker).",
		}, []string{"blame"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.ringChanges, m.notOwner, m.rejoins, m.forwardTimeouts} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
