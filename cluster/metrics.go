package cluster

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	ringChanges   prometheus.Counter
	notOwner      prometheus.Counter
	loads         prometheus.Counter
	loadErrors    prometheus.Counter
	handedOff     prometheus.Counter
	handoffErrors prometheus.Counter
	freezes       prometheus.Counter
	rejoins       prometheus.Counter
	// redisCommands is weir_redis_commands_total, shared with writebehind
	// (op="store_tats"): this package counts op="load_tats" (one MGET per
	// load: a request's missing keys share a group, so one hash slot) and op="decide_strict" (one script call per decision).
	redisCommands *prometheus.CounterVec
	// forwardTimeouts counts forwards that ended without an answer by
	// whom forward.go blamed: owner, caller, local_stall or silent.
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
		rejoins: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_rejoins_total", Help: "Times this node rejoined after seeing at most half of the cluster (the small side of a split); each time it reloaded its in-memory state from Redis.",
		}),
	}
	m.forwardTimeouts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_forward_timeouts_total",
		Help: "Forwards to an owner that ended without an answer, by blame: owner (its latency budget ran out; counts against its breaker), caller (the caller's deadline bounded the wait), local_stall (this node was descheduled past the deadline), silent (the caller's deadline bounded the wait, but the owner has answered nothing for the silence limit; counts against its breaker).",
	}, []string{"blame"})
	m.redisCommands = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_redis_commands_total", Help: "Redis commands sent, by operation.",
	}, []string{"op"})
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.ringChanges, m.notOwner, m.loads, m.loadErrors, m.handedOff, m.handoffErrors, m.freezes, m.rejoins} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	if err := reg.Register(m.forwardTimeouts); err != nil {
		return nil, err
	}
	if err := reg.Register(m.redisCommands); err != nil {
		var already prometheus.AlreadyRegisteredError
		if !errors.As(err, &already) {
			return nil, err
		}
		m.redisCommands = already.ExistingCollector.(*prometheus.CounterVec)
	}
	return m, nil
}
