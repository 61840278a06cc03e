package limiter

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/weirhq/weir/policy"
)

// ReasonStoreFailed is the fallback reason of a batch request whose store
// call failed with an error that names no dependency (not an
// *UnavailableError): in a batch it is met with the request's failure
// policy instead of failing the batch.
const ReasonStoreFailed = "store_failed"

// WaitHinter is implemented by a Store some of whose decisions wait on
// another process (a peer node, Redis). DecideBatch asks it, per matched
// key, whether deciding the key may wait: requests that may are decided
// concurrently, the rest one after another on the caller's goroutine.
// MayWait must be cheap, do no I/O and be safe for concurrent use; a wrong
// answer costs time, never correctness. A Store that does not implement it
// is taken to wait on every request.
type WaitHinter interface {
	MayWait(group, key string, strict bool) bool
}

// mayWait reports whether deciding ms may wait on another process.
func (l *Limiter) mayWait(ms []policy.Match) bool {
	if l.hinter == nil {
		return len(ms) > 0
	}
	for _, m := range ms {
		if l.hinter.MayWait(m.GroupValue, m.Key, m.Limit.Consistency == policy.ConsistencyStrict) {
			return true
		}
	}
	return false
}

// DecideBatch answers rs, one decision per request in order, all stamped
// with one time. Every request is validated first, so one bad request fails
// the batch before anything is consumed.
//
// Requests that may wait on another process (see WaitHinter) are decided
// concurrently, at most Config.BatchConcurrency at a time, while the others
// are decided in order on the caller's goroutine: a batch whose requests go
// to several owners costs about one round trip, not one per request. So
// among requests of one batch on the same key, which are admitted when its
// quota runs out need not follow their order in the batch. A request whose
// store call fails is decided by its failure policy (reason "store_failed"
// when the error names no dependency), so it does not fail the others; only
// ctx ending fails the batch. Reserve and concurrency limits work per
// request as in Decide (a reserve a request may not make fails the batch
// before anything is decided).
func (l *Limiter) DecideBatch(ctx context.Context, rs []Request) ([]Decision, error) {
	if len(rs) > MaxBatch {
		return nil, fmt.Errorf("%w: batch of %d requests exceeds %d", ErrInvalidRequest, len(rs), MaxBatch)
	}
	for i, r := range rs {
		if err := validate(r); err != nil {
			return nil, fmt.Errorf("requests[%d]: %w", i, err)
		}
	}
	p := l.policies.Current()
	sc := l.batches.Get().(*batchScratch)
	defer l.putBatch(sc)
	matches, limits, err := sc.resolve(p, rs)
	if err != nil {
		return nil, err
	}
	for i, r := range rs {
		if err := checkReserve(r.Reserve, matches[i]); err != nil {
			return nil, fmt.Errorf("requests[%d]: %w", i, err)
		}
	}
	now := l.now().UnixNano()
	out := make([]Decision, len(rs))
	errs := sc.errs(len(rs))
	decide := func(i int) {
		out[i], errs[i] = l.decide(ctx, p, matches[i], limits[i], ask{cost: rs[i].Cost, now: now, reserve: rs[i].Reserve, lenient: true})
	}
	waiting, inline := sc.waiting[:0], sc.inline[:0]
	for i := range rs {
		if l.mayWait(matches[i]) {
			waiting = append(waiting, i)
		} else {
			inline = append(inline, i)
		}
	}
	sc.waiting, sc.inline = waiting, inline
	wg := l.startBatchWorkers(waiting, decide)
	for _, i := range inline {
		decide(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("requests[%d]: %w", i, err)
		}
	}
	return out, nil
}

// startBatchWorkers runs decide for every index of idx on up to
// BatchConcurrency goroutines and returns their group to wait on.
func (l *Limiter) startBatchWorkers(idx []int, decide func(int)) *sync.WaitGroup {
	var wg sync.WaitGroup
	var next atomic.Int64
	for range min(len(idx), l.batchConcurrency) {
		wg.Go(func() {
			for {
				n := next.Add(1) - 1
				if n >= int64(len(idx)) {
					return
				}
				decide(idx[n])
			}
		})
	}
	return &wg
}

// batchScratch is what one DecideBatch needs only while it runs: the
// requests' matches and the slices that index them. Batches reuse it
// (Limiter.batches) instead of allocating it anew; what DecideBatch
// returns (the decisions and their limit slab) is never part of it.
type batchScratch struct {
	all     []policy.Match
	ends    []int
	matches [][]policy.Match
	limits  [][]LimitDecision
	errors  []error
	waiting []int
	inline  []int
}

// maxPooledMatches caps the matches a pooled batchScratch keeps, so a rare
// huge batch does not pin its slab (about 80 bytes a match).
const maxPooledMatches = 4 * MaxBatch

// putBatch clears sc, so that it holds no keys, policies or errors, and
// returns it to the pool.
func (l *Limiter) putBatch(sc *batchScratch) {
	if cap(sc.all) > maxPooledMatches {
		return
	}
	clear(sc.all[:cap(sc.all)])
	clear(sc.matches)
	clear(sc.limits)
	clear(sc.errors)
	l.batches.Put(sc)
}

// errs returns n nil errors.
func (sc *batchScratch) errs(n int) []error {
	sc.errors = grow(sc.errors, n)
	return sc.errors
}

// grow returns s with length n, reusing its array when it is large enough.
// The elements are those the array held (putBatch cleared them).
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// resolve resolves every request of a batch (all first: unknown
// descriptors are bad input too) into one slab of matches, and cuts a new
// slab of limit decisions to match: the limit decisions are the only
// allocation. Each request's parts are capped at their length, so
// appending to one never writes into the next.
func (sc *batchScratch) resolve(p *policy.Policy, rs []Request) ([][]policy.Match, [][]LimitDecision, error) {
	all := sc.all[:0]
	if cap(all) < 2*len(rs) {
		all = make([]policy.Match, 0, 2*len(rs))
	}
	ends := grow(sc.ends, len(rs))
	for i, r := range rs {
		var err error
		all, err = resolve(p, r.Descriptors, all)
		if all != nil {
			sc.all = all // keep a grown slab, for putBatch to clear
		}
		if err != nil {
			return nil, nil, fmt.Errorf("requests[%d]: %w", i, err)
		}
		ends[i] = len(all)
	}
	matches, limits := grow(sc.matches, len(rs)), grow(sc.limits, len(rs))
	sc.ends, sc.matches, sc.limits = ends, matches, limits
	slab := make([]LimitDecision, len(all))
	start := 0
	for i, end := range ends {
		matches[i] = all[start:end:end]
		limits[i] = slab[start:end:end]
		start = end
	}
	return matches, limits, nil
}
