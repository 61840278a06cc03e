package cluster

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	ringChanges   prometheus.Counter
	notOwner      prometheus.Counter
	loads         prometheus.Counter
	loadErrors    prometheus.Counter
	handedOff     prometheus.Counter
	handoffErrors prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		ringChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_ring_changes_total", Help: "Membership changes applied to the ownership ring.",
		}),
		notOwner: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_forward_not_owner_total", Help: "Forwards answered by a node that no longer owned the group (retried at the owner it named).",
		}),
		loads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_owner_state_loads_total", Help: "Redis reads of TATs an owner made before its first decision on keys.",
		}),
		loadErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_owner_state_load_errors_total", Help: "Failed TAT loads (the decision fell back).",
		}),
		handedOff: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_handoff_keys_total", Help: "Keys dropped from owner memory because their group moved to another node.",
		}),
		handoffErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_handoff_flush_errors_total", Help: "Hand-offs whose flush to Redis did not complete in time.",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.ringChanges, m.notOwner, m.loads, m.loadErrors, m.handedOff, m.handoffErrors} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
