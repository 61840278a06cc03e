package writebehind

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	flushOK  prometheus.Counter
	flushErr prometheus.Counter
	written  prometheus.Counter
	commands prometheus.Counter
	dropped  prometheus.Counter
	// backlogFull counts marks refused by a full backlog.
	backlogFull prometheus.Counter
}

// weir_redis_commands_total is shared by every component that talks to
// Redis, each with its own op label: all must use exactly this name, help
// and label set, or the registry rejects the second.
const (
	redisCommandsName = "weir_redis_commands_total"
	redisCommandsHelp = "Redis commands sent, by operation."
)

// newMetrics builds w's metrics and registers them on reg (nil: none).
// weir_redis_commands_total may already be registered by another
// component; its existing collector is then shared.
func newMetrics(reg prometheus.Registerer, w *Writer) (*metrics, error) {
	flushes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_writebehind_flushes_total",
		Help: "StoreTATs calls (batches) by result (ok or error).",
	}, []string{"result"})
	written := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "weir_writebehind_tats_written_total",
		Help: "TATs stored successfully.",
	})
	dropped := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "weir_writebehind_dropped_total",
		Help: "Marks dropped because the key was empty or the TAT outside [0, redisbackend.MaxTime].",
	})
	backlogFull := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "weir_writebehind_backlog_full_total",
		Help: "Marks of live keys dropped because the backlog held Config.MaxBacklog keys: a crash may lose these keys' state.",
	})
	pending := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "weir_writebehind_pending",
		Help: "TATs marked but not yet known to be stored (the backlog).",
	}, func() float64 { return float64(w.Pending()) })
	lag := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "weir_writebehind_lag_seconds",
		Help: "Age of the oldest mark not yet known to be stored (an upper bound); 0 when none.",
	}, func() float64 { return float64(w.lagNanos()) / 1e9 })
	commands := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: redisCommandsName,
		Help: redisCommandsHelp,
	}, []string{"op"})

	if reg != nil {
		var err error
		if commands, err = registerShared(reg, commands); err != nil {
			return nil, err
		}
		if err := registerAll(reg, flushes, written, dropped, backlogFull, pending, lag); err != nil {
			return nil, err
		}
	}
	return &metrics{
		flushOK:     flushes.WithLabelValues("ok"),
		flushErr:    flushes.WithLabelValues("error"),
		written:     written,
		commands:    commands.WithLabelValues("store_tats"),
		dropped:     dropped,
		backlogFull: backlogFull,
	}, nil
}

// registerShared registers c or returns the equal collector already there.
func registerShared(reg prometheus.Registerer, c *prometheus.CounterVec) (*prometheus.CounterVec, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
			return existing, nil
		}
	}
	return nil, fmt.Errorf("writebehind: register metrics: %w", err)
}

// registerAll registers cs, undoing its own registrations on failure.
func registerAll(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return fmt.Errorf("writebehind: register metrics: %w", err)
		}
	}
	return nil
}
