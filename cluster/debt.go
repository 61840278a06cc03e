package cluster

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/limiter"
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
// own goroutine, one per owner at a time, and sends one peer.Item with
// Debt set per key; peer.Client coalesces them into batches. Units that
// cannot be delivered go back into the table for the next flush.
//
// The owner side is chargeDebt: it moves the key's TAT by units x interval,
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

// debtMetrics count units of fallback debt by event.
type debtMetrics struct {
	units *prometheus.CounterVec
}

func newDebtMetrics(reg prometheus.Registerer) (*debtMetrics, error) {
	m := &debtMetrics{units: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_fallback_debt_units_total",
		Help: "Units admitted by a failure policy and owed to the key's owner, by event: recorded (admitted by fallback here), reported (delivered to the owner), dropped (not kept: the table was full, or beyond a full burst), charged (moved a key's TAT at its owner), forgiven (did not fit: the key was already spent at its owner).",
	}, []string{"event"})}
	if reg != nil {
		if err := reg.Register(m.units); err != nil {
			return nil, err
		}
	}
	return m, nil
}

var _ limiter.FallbackDebtor = (*Cluster)(nil)

// RecordFallback implements limiter.FallbackDebtor: it records units the
// limiter admitted by fallback, to be charged at the keys' owner later.
// Safe for concurrent use; never blocks on I/O.
func (c *Cluster) RecordFallback(group string, keys []string, limits []gcra.Limit, cost int64) {
	var dropped int64
	for i, k := range keys {
		dropped += c.debts.add(group, k, limits[i], cost)
	}
	c.debtMetrics.units.WithLabelValues("recorded").Add(float64(cost * int64(len(keys))))
	if dropped > 0 {
		c.debtMetrics.units.WithLabelValues("dropped").Add(float64(dropped))
	}
}

// repay starts charging the debts owed to owner, now that owner answered,
// unless there are none or a flush to owner is already running. now is the
// time stamped on the request that succeeded.
func (c *Cluster) repay(owner string, now int64) {
	if c.debts.pending.Load() == 0 {
		return
	}
	entries := c.debts.take(owner, time.Now(), func(group string) bool { return c.owner(group) == owner })
	if len(entries) == 0 {
		return
	}
	go func() {
		defer c.debts.done(owner)
		c.flushDebts(owner, now, entries)
	}()
}

// flushDebts delivers entries to owner, at most debtParallel at once, and
// puts back what could not be delivered.
func (c *Cluster) flushDebts(owner string, now int64, entries []debtEntry) {
	ctx, cancel := context.WithTimeout(context.Background(), debtTimeout)
	defer cancel()
	sem := make(chan struct{}, debtParallel)
	var wg sync.WaitGroup
	for _, d := range entries {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			it := peer.Item{Group: d.group, Keys: []string{d.key}, Limits: []gcra.Limit{d.limit}, Cost: d.units, Now: now, Debt: true}
			var res peer.Result
			var err error
			if owner == c.cfg.LocalName {
				res = c.chargeDebt(ctx, &it)
			} else {
				res, err = c.forward(ctx, owner, it)
			}
			if err != nil || res.Err != nil || res.NotOwner != "" {
				if dropped := c.debts.add(d.group, d.key, d.limit, d.units); dropped > 0 {
					c.debtMetrics.units.WithLabelValues("dropped").Add(float64(dropped))
				}
				return
			}
			c.debtMetrics.units.WithLabelValues("reported").Add(float64(d.units))
		})
	}
	wg.Wait()
}

// chargeDebt is the owner's side: it charges it.Cost units to the item's one
// fast key, never moving the TAT past now + span. The answer's Overall is
// the key's state after the charge. Called from HandleDecide for items
// with Debt set, and for debts this node owes itself.
func (c *Cluster) chargeDebt(ctx context.Context, it *peer.Item) peer.Result {
	if len(it.Keys) != 1 || len(it.Limits) != 1 || it.Cost <= 0 || it.Strict || it.Limits[0].Validate() != nil {
		return peer.Result{Err: fmt.Errorf("cluster: malformed debt item for group %q: %d keys, %d limits, cost %d, strict %v",
			it.Group, len(it.Keys), len(it.Limits), it.Cost, it.Strict)}
	}
	r := limiter.StoreRequest{Group: it.Group, Keys: it.Keys, Limits: it.Limits, Now: it.Now}
	epoch := c.deps.Mem.Epoch()
	if err := c.ensureLoaded(ctx, &r, epoch); err != nil {
		res := peer.Result{Err: err}
		if ue, ok := errors.AsType[*limiter.UnavailableError](err); ok {
			res.Reason = ue.Reason
		}
		return res
	}
	out := make([]gcra.Result, 1)
	var charged int64
	// A decision of cost n succeeds exactly when n units fit before the TAT
	// reaches now + span, at the limit the key is decided at (a global
	// key's regional share). A concurrent decision, or a share change, may
	// take room between the look and the charge; then look again.
	for range 3 {
		n := min(it.Cost, c.debtRoom(epoch, &r))
		if n == 0 {
			break
		}
		r.Cost = n
		agg, err := c.decideHeld(ctx, epoch, &r, out)
		if err != nil {
			return peer.Result{Err: err}
		}
		if agg.Allowed {
			charged = n
			break
		}
	}
	c.debtMetrics.units.WithLabelValues("charged").Add(float64(charged))
	if forgiven := it.Cost - charged; forgiven > 0 {
		c.debtMetrics.units.WithLabelValues("forgiven").Add(float64(forgiven))
	}
	tat := max(c.deps.Mem.Get(it.Group, it.Keys[0]), it.Now)
	after := gcra.Result{Allowed: true, TAT: tat, Remaining: c.debtRoom(epoch, &r), ResetAfter: tat - it.Now}
	return peer.Result{Overall: after, Results: []gcra.Result{after}}
}

// debtRoom is the room of r's one key, now, at the limit its decisions
// enforce: r.Limits[0], or this region's share of it for a global key
// (whose TAT regionLimits first rescales to that share, as a decision
// would). A share that admits nothing has no room.
func (c *Cluster) debtRoom(epoch uint64, r *limiter.StoreRequest) int64 {
	look := *r
	look.Cost = 0 // a look, not demand
	limits, ok, release := c.regionLimits(epoch, &look)
	defer release()
	if !ok {
		return 0
	}
	return room(c.deps.Mem.Get(r.Group, r.Keys[0]), r.Now, limits[0])
}

// room is how many units fit on a key at tat before its TAT would pass
// now + the limit's span: what a GCRA decision at now could still admit.
func room(tat, now int64, l gcra.Limit) int64 {
	ahead := max(tat, now) - now
	if ahead >= l.Span() {
		return 0
	}
	return (l.Span() - ahead) / l.Interval
}

// flushingAny reports whether a flush to any owner is running.
func (t *debtTable) flushingAny() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.mu.flushing) > 0
}
