package owner

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	loads         prometheus.Counter
	loadErrors    prometheus.Counter
	handedOff     prometheus.Counter
	handoffErrors prometheus.Counter
	freezes       prometheus.Counter
	// redisCommands is weir_redis_commands_total, shared with writebehind
	// (op="store_tats"): this package counts op="load_tats" (one MGET per
	// load: a request's missing keys share a group, so one hash slot),
	// op="decide_strict" (one script call per decision) and op="lease_store".
	redisCommands *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
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
		freezes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_freezes_total", Help: "Times this process was found frozen (SIGSTOP, VM pause, long stall) past the freeze limit; each time it forgot its in-memory state and reloaded it from Redis.",
		}),
	}
	var err error
	if m.redisCommands, err = registerShared(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_redis_commands_total", Help: "Redis commands sent, by operation.",
	}, []string{"op"})); err != nil {
		return nil, err
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.loads, m.loadErrors, m.handedOff, m.handoffErrors, m.freezes} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
