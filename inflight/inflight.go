package inflight

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
// largest either gRPC listener reads) being received at once.
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

// Budget is a node-wide pool of bytes for requests being received. Waiting
// requests are served fairly between callers: round robin over the callers
// (keys) that have requests waiting, first come first served within one
// caller, so a caller that floods the node waits behind its own requests,
// not in front of everyone else's. It is safe for concurrent use; its
// fields are guarded by mu (see grantLocked).
type Budget struct {
	cfg      Config
	reserved prometheus.Gauge
	refused  prometheus.Counter

	mu struct {
		sync.Mutex
		free    int64
		waiting map[string][]*waiter // per caller, in arrival order
		ring    []string             // callers with requests waiting
		next    int                  // the ring position served next
	}
}

type waiter struct {
	n       int64
	granted bool
	ready   chan struct{} // closed when granted
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
		reserved: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "weir_inflight_reserved_bytes",
			Help: "Bytes reserved node-wide for requests being received or decoded (--max-inflight-bytes bounds it).",
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_inflight_refused_total",
			Help: "Requests refused (gRPC RESOURCE_EXHAUSTED, HTTP 503) because --max-inflight-bytes had no room for them in time.",
		}),
	}
	b.mu.free = cfg.MaxBytes
	b.mu.waiting = map[string][]*waiter{}
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

// TryAcquire reserves n bytes (at most Config.MaxBytes) if they are free
// and no request is waiting, without waiting: the fast path of Acquire, for
// a caller whose key costs something to build (Acquire needs it only to
// queue). ok is false when Acquire would have waited, or n is not
// positive; then nothing is reserved. release is as Acquire's.
func (b *Budget) TryAcquire(n int64) (release func(), ok bool) {
	if n <= 0 {
		return nil, false
	}
	n = min(n, b.cfg.MaxBytes)
	b.mu.Lock()
	if len(b.mu.ring) != 0 || b.mu.free < n {
		b.mu.Unlock()
		return nil, false
	}
	b.mu.free -= n
	b.mu.Unlock()
	b.reserved.Add(float64(n))
	return func() { b.give(n) }, true
}

// Acquire reserves n bytes (at most Config.MaxBytes) for a request of the
// caller key (a connection: its remote address), waiting for at most
// Config.MaxWait. It returns the function that gives the bytes back (call
// it exactly once), or ErrFull, or ctx's error if ctx ends first. n must
// be positive.
func (b *Budget) Acquire(ctx context.Context, key string, n int64) (release func(), err error) {
	if n <= 0 {
		return nil, fmt.Errorf("inflight: reservation of %d bytes must be positive", n)
	}
	n = min(n, b.cfg.MaxBytes)
	release = func() { b.give(n) }
	b.mu.Lock()
	if len(b.mu.ring) == 0 && b.mu.free >= n {
		b.mu.free -= n
		b.mu.Unlock()
		b.reserved.Add(float64(n))
		return release, nil
	}
	w := &waiter{n: n, ready: make(chan struct{})}
	if len(b.mu.waiting[key]) == 0 {
		b.mu.ring = append(b.mu.ring, key)
	}
	b.mu.waiting[key] = append(b.mu.waiting[key], w)
	b.mu.Unlock()

	timer := time.NewTimer(b.cfg.MaxWait)
	defer timer.Stop()
	select {
	case <-w.ready:
		return release, nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = ErrFull
	}
	if b.abandon(key, w) {
		return release, nil // granted while giving up: keep it
	}
	if errors.Is(err, ErrFull) {
		b.refused.Inc()
	}
	return nil, err
}

// give returns n bytes and serves the waiters they make room for.
func (b *Budget) give(n int64) {
	b.reserved.Sub(float64(n))
	b.mu.Lock()
	b.mu.free += n
	b.grantLocked()
	b.mu.Unlock()
}

// abandon takes w out of key's queue, or reports that it was granted.
func (b *Budget) abandon(key string, w *waiter) (granted bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.granted {
		return true
	}
	q := b.mu.waiting[key]
	b.mu.waiting[key] = slices.DeleteFunc(q, func(x *waiter) bool { return x == w })
	if len(b.mu.waiting[key]) == 0 {
		b.dropKeyLocked(key)
	}
	b.grantLocked() // w may have been the head that did not fit
	return false
}

// grantLocked serves waiting requests round robin over callers while the
// next one fits. It stops at the first that does not, so a large request
// is not passed over forever by smaller ones.
func (b *Budget) grantLocked() {
	for len(b.mu.ring) > 0 {
		b.mu.next %= len(b.mu.ring)
		key := b.mu.ring[b.mu.next]
		q := b.mu.waiting[key]
		w := q[0]
		if w.n > b.mu.free {
			return
		}
		b.mu.free -= w.n
		w.granted = true
		b.reserved.Add(float64(w.n))
		close(w.ready)
		if len(q) == 1 {
			b.dropKeyLocked(key) // the next caller moves into this position
		} else {
			b.mu.waiting[key] = q[1:]
			b.mu.next++
		}
	}
}

func (b *Budget) dropKeyLocked(key string) {
	delete(b.mu.waiting, key)
	i := slices.Index(b.mu.ring, key)
	b.mu.ring = slices.Delete(b.mu.ring, i, i+1)
	if i < b.mu.next {
		b.mu.next--
	}
}
