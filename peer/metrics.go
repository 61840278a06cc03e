package peer

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes counted per forwarded item in weir_forwards_total.
const (
	outcomeOK       = "ok"         // the owner decided
	outcomeNotOwner = "not_owner"  // the receiver named another owner
	outcomeError    = "error"      // owner error, transport error, closed
	outcomeTimeout  = "timeout"    // a deadline passed first
	outcomeFull     = "queue_full" // refused at once: the peer's queue was full
)

type metrics struct {
	forwards  *prometheus.CounterVec
	batchSize prometheus.Histogram
	duration  prometheus.Histogram
	rpcErrors prometheus.Counter
	redials   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		forwards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_forwards_total",
			Help: "Items forwarded to their owner, by result (ok, not_owner, error, timeout, queue_full).",
		}, []string{"result"}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "weir_forward_batch_size",
			Help:    "Items per forwarding RPC.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024},
		}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "weir_forward_duration_seconds",
			Help:    "Time a caller waited for a forwarded item, queueing included.",
			Buckets: []float64{2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1},
		}),
		rpcErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_forward_errors_total",
			Help: "Forwarding RPCs that failed as a whole (transport error or deadline), once per batch.",
		}),
		redials: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_peer_redials_total",
			Help: "Connections to a peer replaced by a fresh one after a region report over them timed out or found the peer unavailable.",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.forwards, m.batchSize, m.duration, m.rpcErrors, m.redials} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// observe records one caller's forward.
func (m *metrics) observe(start time.Time, r Result, err error) {
	m.duration.Observe(time.Since(start).Seconds())
	outcome := outcomeOK
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		outcome = outcomeTimeout
	case errors.Is(err, ErrQueueFull):
		outcome = outcomeFull
	case err != nil || r.Err != nil:
		outcome = outcomeError
	case r.NotOwner != "":
		outcome = outcomeNotOwner
	}
	m.forwards.WithLabelValues(outcome).Inc()
}
