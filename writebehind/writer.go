package writebehind

import (
	"context"
	"errors"
	"hash/maphash"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/redisbackend"
)

// Sink is where TATs go. *redisbackend.Backend satisfies it. StoreTATs
// must overwrite unconditionally, treat a TAT at or before its Now as
// "delete the key", and be bounded by ctx.
type Sink interface {
	StoreTATs(ctx context.Context, tats []redisbackend.TAT) error
}

var _ Sink = (*redisbackend.Backend)(nil)

// numShards is the number of independently locked parts of the backlog, a
// power of two. 128 keeps lock contention negligible at a few dozen cores
// while an idle flush scan stays cheap.
const numShards = 128

// maxTAT bounds the TATs a Sink accepts: redisbackend.MaxTime, the latest
// nanosecond TAT whose whole microseconds its Lua script reads exactly.
const maxTAT = redisbackend.MaxTime

// shard is one part of the backlog.
type shard struct {
	mu sync.Mutex
	// dirty maps each key marked since it was last taken by a flush to the
	// largest TAT marked for it. Guarded by mu.
	dirty map[string]int64
	// since is now() when dirty last went from empty to non-empty: the
	// oldest mark it holds is no older. 0 when dirty is empty. Guarded by mu.
	since int64
	// spare is an emptied map kept for the next swap, so that steady-state
	// marking does not allocate. Guarded by Writer.sem, not mu.
	spare map[string]int64
	// pad keeps neighbouring shards' locks off one cache line pair.
	_ [96]byte
}

// Writer keeps the latest TAT of every key marked since its last flush and
// stores them in a Sink in the background. It is safe for concurrent use.
//
// Concurrency idiom: Mark locks one of numShards mutexes, chosen by a hash
// of the key, for a map update. Flushes are serialised by a one-slot
// semaphore (sem), so TATs reach the Sink in the order they were taken and
// an older value of a key can never be written after a newer one by this
// Writer. A flush swaps a shard's map for an empty one under the shard's
// lock and sends the taken entries without holding it, so Mark never waits
// for Redis.
type Writer struct {
	cfg    Config
	sink   Sink
	now    func() int64
	clk    clock.Clock // times Run's flushes and the retry backoff
	logger *slog.Logger
	m      *metrics
	seed   maphash.Seed
	shards [numShards]shard

	// sem holds one token while a flush runs; the holder owns the fields
	// below it.
	sem chan struct{}
	// inflight counts TATs taken from the shards by the running flush and
	// neither stored nor put back yet; inflightSince is the oldest since of
	// the shards they came from (0: none).
	inflight      atomic.Int64
	inflightSince atomic.Int64

	// idle is set while Run sleeps with nothing pending, waiting on wake
	// rather than a timer: a Mark that makes a shard non-empty then sends
	// on wake (buffered 1).
	idle atomic.Bool
	wake chan struct{}

	buf     []redisbackend.TAT // guarded by sem
	sinces  []int64            // guarded by sem; sinces[i] belongs to buf[i]
	failing bool               // guarded by sem; the last store failed
}

// New returns a Writer storing into sink. now returns the current time in
// nanoseconds on the TATs' time base (Redis time, e.g. a redisclock.Clock's
// Now); it stamps each batch as TAT.Now, which sets the keys' expiry,
// and dates marks for the lag metric. It must be cheap and safe for concurrent
// use. Metrics are registered on reg (nil: not registered); logger (nil:
// discarded) receives flush failures and recoveries, once per transition.
//
// The Writer starts no goroutine: call [Writer.Run] to flush periodically.
// Its flush interval and retry backoff run on clock.Real unless an option
// says otherwise ([WithClock]).
func New(cfg Config, sink Sink, now func() int64, logger *slog.Logger, reg prometheus.Registerer, opts ...Option) (*Writer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if sink == nil || now == nil {
		return nil, errors.New("writebehind: a sink and a clock are required")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	w := &Writer{
		cfg:    cfg,
		sink:   sink,
		now:    now,
		clk:    clock.Real(),
		logger: logger,
		seed:   maphash.MakeSeed(),
		sem:    make(chan struct{}, 1),
		wake:   make(chan struct{}, 1),
	}
	for _, o := range opts {
		o(w)
	}
	for i := range w.shards {
		w.shards[i].dirty = make(map[string]int64)
	}
	m, err := newMetrics(reg, w)
	if err != nil {
		return nil, err
	}
	w.m = m
	return w, nil
}

// Option changes a Writer's defaults in [New].
type Option func(*Writer)

// WithClock makes the Writer wait on clk's timers: Run's pause between
// flushes and the backoff of Run, Flush and FlushKeys after a failure.
// Tests pass a clocktest.Manual. nil keeps clock.Real. It is not the TATs'
// time base, which is New's now.
func WithClock(clk clock.Clock) Option {
	return func(w *Writer) {
		if clk != nil {
			w.clk = clk
		}
	}
}

// Mark records that key's TAT is now tat (nanoseconds, same time base as
// now). Marks of one key coalesce until the next flush: only the largest
// TAT is kept. Mark never blocks on the Sink and does not allocate once
// the key's shard has held that many keys before.
//
// Across flushes the last mark wins, so the marks of one key must be made
// in decision order (for example while holding the lock that serialised
// the decision): a smaller TAT marked after a larger one was flushed
// overwrites it.
//
// A TAT outside [0, redisbackend.MaxTime] or an empty key cannot be stored; such a mark is
// dropped and counted in weir_writebehind_dropped_total.
func (w *Writer) Mark(key string, tat int64) {
	if key == "" || tat < 0 || tat > maxTAT {
		w.m.dropped.Inc()
		return
	}
	s := w.shard(key)
	s.mu.Lock()
	first := len(s.dirty) == 0
	if first {
		s.since = w.now()
	}
	if old, ok := s.dirty[key]; (ok && tat > old) || (!ok && w.roomLocked(s)) {
		s.dirty[key] = tat
	}
	s.mu.Unlock()
	if first && w.idle.Load() {
		select {
		case w.wake <- struct{}{}:
		default: // a wake is already on its way
		}
	}
}

// roomLocked reports whether s can take one more key under MaxBacklog,
// dropping its rested marks when it is full (see Config.MaxBacklog). A
// refusal is counted. s.mu is held.
func (w *Writer) roomLocked(s *shard) bool {
	limit := w.cfg.MaxBacklog / numShards
	if w.cfg.MaxBacklog == 0 || len(s.dirty) < max(limit, 1) {
		return true
	}
	now := w.now()
	for k, v := range s.dirty {
		if v <= now {
			delete(s.dirty, k)
		}
	}
	if len(s.dirty) < max(limit, 1) {
		return true
	}
	w.m.backlogFull.Inc()
	return false
}

// Pending returns how many TATs are not yet known to be stored: those
// waiting for a flush plus those in the flush that is running. A key that
// is being flushed and was marked again meanwhile counts twice.
func (w *Writer) Pending() int {
	n := int(w.inflight.Load())
	for i := range w.shards {
		s := &w.shards[i]
		s.mu.Lock()
		n += len(s.dirty)
		s.mu.Unlock()
	}
	return n
}

// lagNanos returns the age of the oldest mark not known to be stored, 0
// when there is none. It is an upper bound: a shard is dated by its first
// mark since it was last emptied.
func (w *Writer) lagNanos() int64 {
	oldest := w.inflightSince.Load()
	for i := range w.shards {
		s := &w.shards[i]
		s.mu.Lock()
		if s.since != 0 && (oldest == 0 || s.since < oldest) {
			oldest = s.since
		}
		s.mu.Unlock()
	}
	if oldest == 0 {
		return 0
	}
	return max(w.now()-oldest, 0)
}

func (w *Writer) shard(key string) *shard {
	return &w.shards[maphash.String(w.seed, key)&(numShards-1)]
}

// take moves the shard's entries for which match is true (all of them when
// match is nil) to buf, each with the shard's since in sinces. It returns
// the extended slices and the shard's since (0 if nothing was taken). The
// caller holds Writer.sem.
func (s *shard) take(buf []redisbackend.TAT, sinces []int64, match func(string) bool) ([]redisbackend.TAT, []int64, int64) {
	s.mu.Lock()
	since := s.since
	if len(s.dirty) == 0 {
		s.mu.Unlock()
		return buf, sinces, 0
	}
	if match != nil {
		n := len(buf)
		for k, v := range s.dirty {
			if match(k) {
				buf = append(buf, redisbackend.TAT{Key: k, TAT: v})
				sinces = append(sinces, since)
				delete(s.dirty, k)
			}
		}
		if len(s.dirty) == 0 {
			s.since = 0
		}
		s.mu.Unlock()
		if len(buf) == n {
			since = 0
		}
		return buf, sinces, since
	}
	taken := s.dirty
	s.dirty, s.spare, s.since = s.spare, nil, 0
	if s.dirty == nil {
		s.dirty = make(map[string]int64, len(taken))
	}
	s.mu.Unlock()
	for k, v := range taken {
		buf = append(buf, redisbackend.TAT{Key: k, TAT: v})
		sinces = append(sinces, since)
	}
	clear(taken)
	s.spare = taken
	return buf, sinces, since
}

// putBack returns TATs whose store failed to the backlog, keeping for each
// key the larger of the failed TAT and any newer mark.
func (w *Writer) putBack(tats []redisbackend.TAT, sinces []int64) {
	for i, t := range tats {
		s := w.shard(t.Key)
		s.mu.Lock()
		if len(s.dirty) == 0 || sinces[i] < s.since {
			s.since = sinces[i]
		}
		if old, ok := s.dirty[t.Key]; (ok && t.TAT > old) || (!ok && w.roomLocked(s)) {
			s.dirty[t.Key] = t.TAT
		}
		s.mu.Unlock()
	}
}
