package owner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/permit"
	"github.com/weirhq/weir/redisbackend"
)

// lockSets returns the entries of r's keys at idx (in idx's order),
// locked in sorted key order so that two requests sharing keys cannot
// deadlock, and the function that unlocks them. A key not in memory is
// loaded from Redis first (no rested rule: a set is small and its Redis
// value is the truth), or starts empty without Redis. It returns
// memstore.ErrStaleEpoch when a drop ran since epoch (an entry is gone or
// cannot be created), memory_full when the cap leaves no room, and
// state_load_failed when the load fails.
func (o *Owner) lockSets(ctx context.Context, epoch uint64, r *decide.Request, idx []int) ([]*permitEntry, func(), error) {
	entries := make([]*permitEntry, len(idx))
	var missing []int // positions in idx
	for j, i := range idx {
		if entries[j] = o.permits.get(r.Group, r.Keys[i]); entries[j] == nil {
			missing = append(missing, j)
		}
	}
	if len(missing) > 0 {
		if err := o.loadEntries(ctx, epoch, r, idx, missing, entries); err != nil {
			return nil, nil, err
		}
	}
	order := make([]int, len(idx)) // positions in idx, by key
	for j := range order {
		order[j] = j
	}
	sort.Slice(order, func(a, b int) bool { return r.Keys[idx[order[a]]] < r.Keys[idx[order[b]]] })
	for j := 1; j < len(order); j++ {
		if r.Keys[idx[order[j]]] == r.Keys[idx[order[j-1]]] {
			return nil, nil, fmt.Errorf("owner: concurrency key %q repeated in one request", r.Keys[idx[order[j]]])
		}
	}
	unlock := func(n int) {
		for _, j := range order[:n] {
			entries[j].mu.Unlock()
		}
	}
	for n, j := range order {
		entries[j].mu.Lock()
		if entries[j].dropped {
			unlock(n + 1)
			return nil, nil, memstore.ErrStaleEpoch
		}
	}
	return entries, func() { unlock(len(order)) }, nil
}

// loadEntries loads the sets of r's keys at idx[missing] and inserts them.
func (o *Owner) loadEntries(ctx context.Context, epoch uint64, r *decide.Request, idx, missing []int, entries []*permitEntry) error {
	sets := make([]*permit.Set, len(missing))
	if o.deps.Permits != nil {
		keys := make([]string, len(missing))
		for n, j := range missing {
			keys[n] = r.Keys[idx[j]]
		}
		var err error
		if sets, err = o.loadSets(ctx, keys); err != nil {
			return err
		}
	}
	for n, j := range missing {
		e, err := o.permits.insertAt(o.deps.Mem, epoch, r.Group, r.Keys[idx[j]], sets[n], r.Now)
		if errors.Is(err, memstore.ErrFull) {
			return &limiter.UnavailableError{Reason: ReasonMemoryFull, Err: err}
		}
		if err != nil {
			return err
		}
		entries[j] = e
	}
	return nil
}

// loadSets reads keys' permit sets from Redis, guarded by the breaker and
// bounded by LoadTimeout. A failure is state_load_failed (the limit's
// failure mode answers), never an empty set.
func (o *Owner) loadSets(ctx context.Context, keys []string) ([]*permit.Set, error) {
	done, err := o.guard(redisBreaker)
	if err != nil {
		return nil, &limiter.UnavailableError{Reason: "state_load_failed", Err: err}
	}
	lctx, cancel := context.WithTimeout(ctx, o.cfg.LoadTimeout)
	defer cancel()
	sets, err := o.deps.Permits.LoadSets(lctx, keys)
	bad := errors.Is(err, redisbackend.ErrBadPermitSet)
	if bad {
		done(nil) // Redis answered: the bytes are wrong, not Redis
	} else {
		done(blame(ctx, err))
	}
	o.metrics.loads.Inc()
	o.metrics.redisCommands.WithLabelValues("load_sets").Inc()
	if err == nil && len(sets) != len(keys) {
		err = fmt.Errorf("owner: redis answered %d permit sets for %d keys", len(sets), len(keys))
	}
	if err != nil {
		o.metrics.loadErrors.Inc()
		if ctx.Err() != nil && !bad {
			return nil, err
		}
		return nil, &limiter.UnavailableError{Reason: "state_load_failed", Err: err}
	}
	return sets, nil
}

// storeSets writes the sets of r's keys at idx (their entries, locked) to
// Redis, when permits persist; bounded by LoadTimeout.
func (o *Owner) storeSets(ctx context.Context, now int64, r *decide.Request, idx []int, entries []*permitEntry) error {
	if o.deps.Permits == nil {
		return nil
	}
	snaps := make([]redisbackend.PermitSet, len(idx))
	for j, i := range idx {
		b, _ := entries[j].set.MarshalBinary() // never fails
		snaps[j] = redisbackend.PermitSet{Key: r.Keys[i], Set: b, Expiry: entries[j].last, Now: max(now, entries[j].set.Latest(), 1)}
	}
	done, err := o.guard(redisBreaker)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, o.cfg.LoadTimeout)
	defer cancel()
	err = o.deps.Permits.StoreSets(sctx, snaps)
	done(blame(ctx, err))
	o.metrics.redisCommands.WithLabelValues("store_sets").Inc()
	return err
}

// permitOp answers a Release or Renew of the permit r.Op.ID on r's
// concurrency keys (keys of other kinds in a forged token are ignored),
// loading sets on first use like a decision. Done reports whether any key
// held the permit; unknown ids change nothing. The sets are written to
// Redis. A failed write does not undo a release (logged and counted: at
// worst a released slot stays held until its TTL); it undoes a renewal,
// answered redis_unavailable, as a renewal Redis lacks would let a
// successor owner admit beyond max_in_flight.
func (o *Owner) permitOp(ctx context.Context, epoch uint64, r *decide.Request) error {
	op := r.Op
	if op.Kind != decide.OpRelease && op.Kind != decide.OpRenew {
		return fmt.Errorf("owner: unknown op kind %d", op.Kind)
	}
	if op.Kind == decide.OpRenew && op.TTL < 0 {
		return fmt.Errorf("owner: renew ttl %dns is negative", op.TTL)
	}
	if len(r.Limits) != len(r.Keys) {
		return fmt.Errorf("owner: %d keys for %d limits", len(r.Keys), len(r.Limits))
	}
	g := r.Grant
	if g == nil {
		g = new(decide.Grant)
	}
	g.Done, g.Expiry = false, 0
	conc, _ := splitKeys(r)
	if o.deps.Permits == nil { // nothing to load: an absent key holds no permit
		conc = slices.DeleteFunc(conc, func(i int) bool { return o.permits.get(r.Group, r.Keys[i]) == nil })
	}
	if len(conc) == 0 {
		return nil
	}
	entries, unlock, err := o.lockSets(ctx, epoch, r, conc)
	if err != nil {
		return err
	}
	defer unlock()
	var changed []int  // positions in conc
	var before []int64 // a renew's earlier expiry per changed position
	for j, i := range conc {
		old, _ := entries[j].set.Expiry(permit.ID(op.ID))
		ok, err := o.applyOp(r, i, entries[j], g)
		if err != nil {
			return err
		}
		if ok {
			changed, before = append(changed, j), append(before, old)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	idx, ents := make([]int, len(changed)), make([]*permitEntry, len(changed))
	for n, j := range changed {
		idx[n], ents[n] = conc[j], entries[j]
	}
	err = o.storeSets(ctx, r.Now, r, idx, ents)
	if err == nil {
		return nil
	}
	name := map[decide.OpKind]string{decide.OpRelease: "release", decide.OpRenew: "renew"}[op.Kind]
	o.pm.storeErrors.WithLabelValues(name).Inc()
	if op.Kind == decide.OpRelease {
		// Redis still holds the permit: a later owner counts it until its
		// TTL, which only errs on the safe side.
		o.logger.Warn("permit release not written to Redis; it holds in memory", "group", r.Group, "err", err)
		return nil
	}
	// A renewal Redis does not hold would be lost with this owner: a
	// successor would count the permit as expired while its holder still
	// works, and admit beyond max_in_flight. Undo it; the caller retries.
	for n, e := range ents {
		if left := before[n] - r.Now; left > 0 {
			_, _, _ = e.set.Renew(r.Now, permit.ID(op.ID), left)
		}
	}
	g.Done, g.Expiry = false, 0
	if ctx.Err() != nil {
		return err
	}
	return &limiter.UnavailableError{Reason: "redis_unavailable", Err: err}
}

// applyOp applies r's release or renew to key i's locked entry e, filling
// g; it reports whether the set changed.
func (o *Owner) applyOp(r *decide.Request, i int, e *permitEntry, g *decide.Grant) (bool, error) {
	name := r.Def(i).Name
	id := permit.ID(r.Op.ID)
	if r.Op.Kind == decide.OpRelease {
		ok := e.set.Release(r.Now, id)
		o.pm.released.WithLabelValues(name, heldLabel(ok, "released")).Inc()
		g.Done = g.Done || ok
		return ok, nil
	}
	limTTL := permitLimit(r.Limits[i]).TTL
	ttl := r.Op.TTL
	if ttl == 0 || ttl > limTTL {
		ttl = limTTL // 0: the limit's ttl; longer: clamped to it
	}
	exp, ok, err := e.set.Renew(r.Now, id, ttl)
	if err != nil {
		return false, fmt.Errorf("owner: renew on %q: %w", r.Keys[i], err)
	}
	o.pm.renewed.WithLabelValues(name, heldLabel(ok, "renewed")).Inc()
	if ok {
		e.last = max(e.last, exp)
		if !g.Done || exp < g.Expiry {
			g.Expiry = exp
		}
		g.Done = true
	}
	return ok, nil
}

func heldLabel(ok bool, yes string) string {
	if ok {
		return yes
	}
	return "not_held"
}

// sweepPermits expires permits at now, forgets empty sets, refreshes
// weir_permits_live and counts the expired; it returns the sets forgotten.
func (o *Owner) sweepPermits(now int64) int {
	st := o.permits.sweep(now)
	o.pm.live.Reset()
	for name, n := range st.live {
		o.pm.live.WithLabelValues(name).Set(float64(n))
	}
	for name, n := range st.expired {
		o.pm.expired.WithLabelValues(name).Add(float64(n))
	}
	return st.dropped
}

// Permits reads key's live permits at now for admin inspection: the slots
// in flight, the bound it was last used with, and the permits, earliest
// expiry first. ok is false when the key is not in this owner's memory
// (never used here, swept empty, or handed off). The ids are the
// permits' secrets: show a prefix only. Safe for concurrent use.
func (o *Owner) Permits(group, key string, now int64) (inFlight, max int64, permits []permit.Permit, ok bool) {
	e := o.permits.get(group, key)
	if e == nil {
		return 0, 0, nil, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.dropped {
		return 0, 0, nil, false
	}
	list := e.set.Permits(now)
	return e.set.InFlight(), e.limit.MaxInFlight, slices.Clip(list), true
}
