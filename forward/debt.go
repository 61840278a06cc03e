package forward

import (
	"container/list"
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/intake"
	"github.com/weirhq/weir/peer"
)

// Fallback debt: a node that admits units by a failure policy (the owner
// could not be reached, or could not load state) records them per key, and
// once the key's owner answers again the units are charged to the key's
// state there, so a fault shifts admissions in time instead of adding them.
//
// The sender side is debtTable: bounded, per (group, key), and flushed to an
// owner right after a forward to that owner succeeds (or, for groups this
// node owns, after one of its own decisions succeeds). A flush runs in its
// own goroutine, one per owner at a time, and sends one decide.Request with
// Debt set per key; peer.Client coalesces them into batches. Units that
// cannot be delivered go back into the table for the next flush.
//
// The owner side is owner.Owner.ChargeDebt: it moves the key's TAT by units x interval,
// but never past now + the limit's span (a fully spent key). The cap keeps
// every charged unit a unit the key cannot admit within the window that
// holds the charge; debt beyond a full burst is forgiven. See
// docs/operations.md, "Fallback allowance".

const (
	// maxDebtKeys bounds the debt table. When it is full the oldest entry
	// is dropped (and its units counted as dropped) to make room.
	maxDebtKeys = 10_000
	// debtTimeout bounds one flush of debts to an owner.
	debtTimeout = time.Second
	// debtParallel caps the debt items of one flush in flight at once.
	debtParallel = 64
	// debtScanInterval is the least time between two looks through the
	// table for one owner's debts. Every successful decision may ask; while
	// debts for an unreachable owner wait, this keeps the decision path
	// from scanning the table each time.
	debtScanInterval = 100 * time.Millisecond
)

type debtKey struct{ group, key string }

type debtEntry struct {
	debtKey
	limit gcra.Limit // the key's own limit, as the limiter reported it
	units int64
}

// debtTable holds units admitted by fallback and not yet charged. Its
// idiom: every field under mu; the oldest entry is at the front of order.
// Safe for concurrent use.
type debtTable struct {
	pending atomic.Int64 // entries held; read without the lock on the decision path
	mu      struct {
		sync.Mutex
		entries  map[debtKey]*list.Element // of *debtEntry
		order    list.List
		flushing map[string]bool      // owners with a flush in flight
		scanned  map[string]time.Time // owner -> last look for its debts
	}
}

func newDebtTable() *debtTable {
	t := &debtTable{}
	t.mu.entries = make(map[debtKey]*list.Element)
	t.mu.flushing = make(map[string]bool)
	t.mu.scanned = make(map[string]time.Time)
	return t
}

// add records units admitted on key and returns the units it had to drop:
// the oldest entry's when the table is full, and what exceeds a full burst
// (the owner would forgive it anyway).
func (t *debtTable) add(group, key string, l gcra.Limit, units int64) (dropped int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := debtKey{group, key}
	e, ok := t.mu.entries[k]
	if !ok {
		if t.mu.order.Len() >= maxDebtKeys {
			oldest := t.mu.order.Remove(t.mu.order.Front()).(*debtEntry)
			delete(t.mu.entries, oldest.debtKey)
			dropped += oldest.units
		}
		// The group may be cut from a request's decode buffer: keep a copy
		// of its own rather than pin that buffer while the debt waits.
		k.group = strings.Clone(group)
		e = t.mu.order.PushBack(&debtEntry{debtKey: k})
		t.mu.entries[k] = e
	}
	d := e.Value.(*debtEntry)
	d.limit = l
	d.units += units
	if d.units > l.Burst {
		dropped += d.units - l.Burst
		d.units = l.Burst
	}
	t.pending.Store(int64(t.mu.order.Len()))
	return dropped
}

// take removes and returns the entries for which mine is true, and marks a
// flush to owner as running. It returns nothing if one already is, or if
// it last looked for owner's debts less than debtScanInterval before now.
func (t *debtTable) take(owner string, now time.Time, mine func(group string) bool) []debtEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.flushing[owner] || now.Sub(t.mu.scanned[owner]) < debtScanInterval {
		return nil
	}
	t.mu.scanned[owner] = now
	var out []debtEntry
	for e := t.mu.order.Front(); e != nil; {
		next := e.Next()
		if d := e.Value.(*debtEntry); mine(d.group) {
			out = append(out, *d)
			t.mu.order.Remove(e)
			delete(t.mu.entries, d.debtKey)
		}
		e = next
	}
	if len(out) > 0 {
		t.mu.flushing[owner] = true
	}
	t.pending.Store(int64(t.mu.order.Len()))
	return out
}

func (t *debtTable) done(owner string) {
	t.mu.Lock()
	delete(t.mu.flushing, owner)
	t.mu.Unlock()
}

// RecordFallback implements limiter.FallbackDebtor: it records units the
// limiter admitted by fallback, to be charged at the keys' owner later.
// Safe for concurrent use; never blocks on I/O.
//
// keys must hold no concurrency limit's key: fallback debt is never
// recorded for permits, and a gcra.Limit does not say which keys those
// are, so the caller (the limiter, which knows its matches' kinds) leaves
// them out. An owner's intake refuses debt on a concurrency key; a debt an
// owner refuses is dropped, not kept for the next flush.
func (f *Router) RecordFallback(group string, keys []string, limits []gcra.Limit, cost int64) {
	var dropped int64
	for i, k := range keys {
		dropped += f.debts.add(group, k, limits[i], cost)
	}
	f.debt.WithLabelValues("recorded").Add(float64(cost * int64(len(keys))))
	if dropped > 0 {
		f.debt.WithLabelValues("dropped").Add(float64(dropped))
	}
}

// repay starts charging the debts owed to owner, now that owner answered,
// unless there are none or a flush to owner is already running. now is the
// time stamped on the request that succeeded.
func (f *Router) repay(owner string, now int64) {
	if f.debts.pending.Load() == 0 {
		return
	}
	entries := f.debts.take(owner, f.clk.Now(), func(group string) bool { return f.routes.Owner(group) == owner })
	if len(entries) == 0 {
		return
	}
	go func() {
		defer f.debts.done(owner)
		f.flushDebts(owner, now, entries)
	}()
}

// flushDebts delivers entries to owner, at most debtParallel at once, and
// puts back what could not be delivered.
func (f *Router) flushDebts(owner string, now int64, entries []debtEntry) {
	ctx, cancel := context.WithTimeout(context.Background(), debtTimeout)
	defer cancel()
	rt := decide.Route{Owner: owner, Addr: f.routes.Addr(owner)}
	sem := make(chan struct{}, debtParallel)
	var wg sync.WaitGroup
	for _, d := range entries {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			it := decide.Request{Group: d.group, Keys: []string{d.key}, Limits: []gcra.Limit{d.limit}, Cost: d.units, Now: now, Debt: true}
			var res peer.Result
			var err error
			if owner == f.local {
				res = f.deps.Owner.ChargeDebt(ctx, &it)
			} else {
				res, err = f.forward(ctx, rt, it)
			}
			if err == nil && res.Reason == intake.ReasonRefused {
				// The owner will refuse it again (a concurrency key, whose
				// permits take no debt, or a key its policy refuses).
				f.debt.WithLabelValues("dropped").Add(float64(d.units))
				return
			}
			if err != nil || res.Err != nil || res.NotOwner != "" {
				if dropped := f.debts.add(d.group, d.key, d.limit, d.units); dropped > 0 {
					f.debt.WithLabelValues("dropped").Add(float64(dropped))
				}
				return
			}
			f.debt.WithLabelValues("reported").Add(float64(d.units))
		})
	}
	wg.Wait()
}

// flushingAny reports whether a flush to any owner is running.
func (t *debtTable) flushingAny() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.mu.flushing) > 0
}
