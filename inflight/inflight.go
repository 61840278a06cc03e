package inflight

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"
)

// ErrFull is returned by Acquire when the budget had no room for the
// request within Config.MaxWait.
var ErrFull = errors.New("inflight: node is receiving too many bytes at once")

// Config sizes a Budget.
type Config struct {
	// MaxBytes is the most bytes reserved at once, node-wide. A single
	// reservation larger than this is cut to MaxBytes, so any one request
	// can always be received alone.
	MaxBytes int64
	// MaxWait is the longest a request waits for room before ErrFull. A
	// caller whose context ends sooner gets the context's error instead.
	MaxWait time.Duration
}

// DefaultConfig returns 256 MiB and 5 s: sixteen 16 MiB gRPC messages (the
// largest either gRPC listener reads) being received at once, and a wait
// long enough for a small call to get through a flood of 200 concurrent
// 4 MB calls (server.TestGRPC_inflightBudgetBoundsConcurrentHugeCalls; with
// 1 s it was refused).
func DefaultConfig() Config {
	return Config{MaxBytes: 256 << 20, MaxWait: 5 * time.Second}
}

// Validate reports every problem with c. It changes nothing.
func (c Config) Validate() error {
	var errs []error
	if c.MaxBytes <= 0 {
		errs = append(errs, fmt.Errorf("inflight: max bytes %d must be positive", c.MaxBytes))
	}
	if c.MaxWait <= 0 {
		errs = append(errs, fmt.Errorf("inflight: max wait %v must be positive", c.MaxWait))
	}
	return errors.Join(errs...)
}

// Budget is a node-wide pool of bytes for requests being received. It is
// safe for concurrent use.
type Budget struct {
	cfg      Config
	sem      *semaphore.Weighted
	reserved prometheus.Gauge
	refused  prometheus.Counter
}

// New returns a Budget of cfg.MaxBytes with its metrics registered on reg
// (nil registers nothing): weir_inflight_reserved_bytes,
// weir_inflight_max_bytes and weir_inflight_refused_total.
func New(cfg Config, reg prometheus.Registerer) (*Budget, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := &Budget{
		cfg: cfg,
		sem: semaphore.NewWeighted(cfg.MaxBytes),
		reserved: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "weir_inflight_reserved_bytes",
			Help: "Bytes reserved node-wide for requests being received or decoded (--max-inflight-bytes bounds it).",
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_inflight_refused_total",
			Help: "Requests refused (gRPC RESOURCE_EXHAUSTED, HTTP 503) because --max-inflight-bytes had no room for them in time.",
		}),
	}
	if reg != nil {
		limit := prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "weir_inflight_max_bytes",
			Help: "The node-wide bound on bytes being received (--max-inflight-bytes).",
		})
		limit.Set(float64(cfg.MaxBytes))
		reg.MustRegister(b.reserved, b.refused, limit)
	}
	return b, nil
}

// Acquire reserves n bytes (at most Config.MaxBytes), waiting in arrival
// order for at most Config.MaxWait. It returns the function that gives the
// bytes back (call it exactly once), or ErrFull, or ctx's error if ctx
// ends first. n must be positive.
func (b *Budget) Acquire(ctx context.Context, n int64) (release func(), err error) {
	if n <= 0 {
		return nil, fmt.Errorf("inflight: reservation of %d bytes must be positive", n)
	}
	n = min(n, b.cfg.MaxBytes)
	if !b.sem.TryAcquire(n) {
		wctx, cancel := context.WithTimeout(ctx, b.cfg.MaxWait)
		err := b.sem.Acquire(wctx, n)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			b.refused.Inc()
			return nil, ErrFull
		}
	}
	b.reserved.Add(float64(n))
	return func() {
		b.reserved.Sub(float64(n))
		b.sem.Release(n)
	}, nil
}
