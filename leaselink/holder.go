package leaselink

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/weirhq/weir/breaker"
	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/lease"
	"github.com/weirhq/weir/peer"
)

// refs fills refs with r's keys as lease references, owned by owner, and
// reports whether r may be decided from leases at all: it is fast and
// every one of its limits is leasable (its Def has lease terms, is fast
// and enforced, and is big enough for the cluster: lease.CheckLeasable).
// It reads r's Defs: no policy, no key parsed.
func (l *Link) refs(r *decide.Request, owner string, refs []lease.Ref) ([]lease.Ref, bool) {
	if r.Strict || len(r.Defs) != len(r.Keys) {
		return refs, false
	}
	for _, d := range r.Defs {
		if d == nil || d.Lease == nil {
			return refs, false // most limits lease nothing: no member count needed
		}
	}
	nodes := l.deps.Routes.Members()
	for i, key := range r.Keys {
		d := r.Defs[i]
		if !d.Leasable() || lease.CheckLeasable(r.Limits[i], *d.Lease, nodes) != nil {
			return refs, false
		}
		refs = append(refs, lease.Ref{Group: r.Group, Key: key, Owner: owner, Limit: r.Limits[i], Terms: *d.Lease, Label: d.Name})
	}
	return refs, true
}

// Spend decides r from leases this node holds for its route rt, when it
// can: it reports false when r must be forwarded to rt's owner as usual. A request
// admitted from leases has every key charged; one refused is refused with
// the owner's last denial, measured from when it arrived. A request on a
// key with a refresh in flight or due (its lease given back, used up or
// expired while demand remains, or a saturated key past its denial) waits
// for one refresh to the owner (see awaitLease) and is then decided from
// its answer, within b's budget. It sets r.FromLease. Safe for concurrent
// use.
func (l *Link) Spend(ctx context.Context, r *decide.Request, rt decide.Route, out []gcra.Result, b Budgeter) (gcra.Result, bool) {
	var buf [2]lease.Ref // most leasable requests have one key; more allocate
	refs, ok := l.refs(r, rt.Owner, buf[:0])
	if !ok {
		return gcra.Result{}, false
	}
	l.hmu.Lock()
	defer l.hmu.Unlock()
	v, err := l.h.Spend(refs, r.Cost, l.monoNow())
	if l.sleeping.Load() { // the holder tracks r's keys now: Run ticks again
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
	// Two waits at most: a refresh already in flight may not carry this
	// request's keys; the probe sent after it does.
	for round := 0; err == nil && v.Outcome == lease.Await; round++ {
		patient := round < 2 && l.await(ctx, rt, b)
		v, err = l.h.Resume(refs, r.Cost, l.monoNow(), patient)
	}
	if err != nil {
		return gcra.Result{}, false // the owner answers bad input as ever
	}
	now := l.monoNow()
	r.FromLease = v.Outcome == lease.Spent || v.Outcome == lease.Refused
	switch v.Outcome {
	case lease.Spent:
		agg := gcra.Result{Allowed: true, Remaining: -1}
		for i, ref := range refs {
			out[i] = gcra.Result{Allowed: true, Remaining: l.h.Ready(ref.Key, now)}
			if agg.Remaining < 0 || out[i].Remaining < agg.Remaining {
				agg.Remaining = out[i].Remaining
			}
		}
		return agg, true
	case lease.Refused:
		if v.Probe {
			l.probeLocked(rt.Owner, rt.Addr) // answer before the denial ends
		}
		for i := range refs {
			out[i] = gcra.Result{RetryAfter: v.RetryAfter}
		}
		return gcra.Result{RetryAfter: v.RetryAfter}, true
	}
	return gcra.Result{}, false
}

// await waits, with l.hmu held on entry and on return (released
// meanwhile), until the refresh in flight to rt's owner is answered or
// given up, sending a probe (lease.Holder.Probe) first if none is in
// flight. It reports false, at once, when there is nothing to wait for
// (leases are shutting down, the owner's breaker is open, or no key is
// due), and when the wait outlasts the caller's forward budget (b): the
// request then forwards, which falls back if no time is left. One refresh
// answers every request that waits for it, so a flood on a saturated key
// costs one RPC per refresh, not a hop per request.
func (l *Link) await(ctx context.Context, rt decide.Route, b Budgeter) bool {
	if !l.probeLocked(rt.Owner, rt.Addr) {
		return false
	}
	ch := l.settled[rt.Owner]
	if ch == nil {
		ch = make(chan struct{})
		l.settled[rt.Owner] = ch
	}
	l.hmu.Unlock()
	defer l.hmu.Lock()
	budget := b.Budget(ctx, rt.Addr)
	if budget <= 0 {
		return false
	}
	t := l.clk.NewTimer(budget)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C():
		return false
	case <-ctx.Done():
		return false
	}
}

// probeLocked sends a probe (lease.Holder.Probe) to owner at addr in the
// background, unless a refresh to it is in flight already, and reports
// whether one is in flight now. It sends none while leases shut down, to
// an owner without an address, or to one whose breaker is open: a
// forward fails fast then, where a probe would wait out its timeout.
// l.hmu must be held.
func (l *Link) probeLocked(owner, addr string) bool {
	if l.h.InFlight(owner) {
		return true
	}
	if addr == "" || (l.deps.Breakers != nil && l.deps.Breakers.Get(addr).State() == breaker.Open) {
		return false
	}
	select {
	case <-l.stop:
		return false
	default:
	}
	r, ok := l.h.Probe(owner, l.monoNow())
	if ok {
		l.probes.Go(func() { l.sendRefresh(context.Background(), r) })
	}
	return ok
}

// NoteDenials remembers the owner's denials of a forwarded leasable
// request, so that a flood on a saturated key is refused here until one
// unit would fit, instead of costing a hop each. Safe for concurrent use.
func (l *Link) NoteDenials(r *decide.Request, out []gcra.Result) {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	now := l.monoNow()
	for i, key := range r.Keys {
		if !out[i].Allowed && !out[i].TooCostly {
			l.h.NoteDenial(key, out[i].RetryAfter, r.Cost, now)
		}
	}
}

// Tick runs one round of the holder side: one batched refresh to every
// owner some held key needs one from, sent concurrently and applied as
// they answer, and, every SweepEvery, a sweep of both sides (the owner's
// through Deps.Grants). It returns when every refresh has been answered
// or abandoned. Safe for concurrent use.
func (l *Link) Tick(ctx context.Context) {
	l.hmu.Lock()
	now := l.monoNow()
	var refreshes []lease.Refresh
	for _, owner := range l.h.Due(now) {
		if r, ok := l.h.Refresh(owner, now); ok {
			refreshes = append(refreshes, r)
		}
	}
	sweep := now-l.swept >= l.cfg.SweepEvery.Nanoseconds()
	if sweep {
		l.h.Sweep(now)
		l.swept = now
	}
	l.hmu.Unlock()
	if sweep && l.deps.Grants != nil {
		l.deps.Grants.SweepGrants()
	}
	var wg sync.WaitGroup
	for _, r := range refreshes {
		wg.Go(func() { l.sendRefresh(ctx, r) })
	}
	wg.Wait()
}

// sendRefresh sends r to its owner and applies the answer, or abandons r.
func (l *Link) sendRefresh(ctx context.Context, r lease.Refresh) {
	addr := l.deps.Routes.Addr(r.Owner)
	if r.Owner == l.cfg.LocalName {
		addr = "" // this node became the owner: its own keys need no lease
	}
	var answers []peer.LeaseAnswer
	err := errors.New("leaselink: no address for the owner")
	if addr != "" {
		rctx, cancel := context.WithTimeout(ctx, l.cfg.RPCTimeout)
		answers, err = l.deps.Leaser.Lease(rctx, addr, r)
		cancel()
	}
	l.metrics.rpc(err)
	l.hmu.Lock()
	defer l.hmu.Unlock()
	if ch := l.settled[r.Owner]; ch != nil {
		close(ch) // wake the requests that await this refresh (awaitLease)
		delete(l.settled, r.Owner)
	}
	if err != nil {
		l.h.Abandon(r.Owner, r.Seq)
		return
	}
	reply := lease.Reply{Owner: r.Owner, Seq: r.Seq, Answers: make([]lease.Answer, len(answers))}
	for i, a := range answers {
		reply.Answers[i] = a.Answer
		switch {
		case a.NotOwner != "":
			// Nothing granted: forward for a while, as after a busy answer.
			reply.Answers[i] = lease.Answer{Outcome: lease.Busy}
		case a.Err != nil:
			// The owner failed (most often its write-through timed out on
			// a slow Redis) and revoked what it granted: it holds no lease
			// of ours, so ask again after a tick, not 40% of a TTL, for
			// every request forwarded meanwhile costs a hop.
			reply.Answers[i] = lease.Answer{Outcome: lease.Busy, RetryAfter: l.cfg.Tick.Nanoseconds()}
		}
	}
	if _, err := l.h.Apply(reply, l.monoNow()); err != nil {
		l.logger.Warn("lease reply refused", "owner", r.Owner, "err", err)
	}
}

// Run calls Tick every Config.Tick until ctx ends or Shutdown is called.
// Call it at most once, in its own goroutine.
func (l *Link) Run(ctx context.Context) {
	l.running.Store(true)
	defer close(l.done)
	t := l.clk.NewTimer(l.cfg.Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.stop:
			return
		case <-t.C():
		case <-l.wake: // only sent while sleeping
			t.Stop()
		}
		l.sleeping.Store(false)
		l.Tick(ctx)
		t.Reset(l.nextTick())
	}
}

// nextTick is Run's pause after a tick: Tick, or SweepEvery while the
// holder tracks no key (a node with no leasable traffic then wakes once a
// second, for the sweeps, not a hundred times). sleeping is set before the
// holder is looked at, and Spend checks it after the holder took its keys,
// so a Spend meanwhile either is seen here or wakes Run.
func (l *Link) nextTick() time.Duration {
	l.sleeping.Store(true)
	l.hmu.Lock()
	empty := l.h.Len() == 0
	l.hmu.Unlock()
	if empty {
		return l.cfg.SweepEvery
	}
	l.sleeping.Store(false)
	return l.cfg.Tick
}

// Shutdown stops Run and the probes of saturated keys and waits for them,
// or for ctx. Units still held strand at their owners until their leases
// expire. Idempotent.
func (l *Link) Shutdown(ctx context.Context) error {
	l.hmu.Lock() // probeLocked checks stop under it before sending a probe
	l.stopOnce.Do(func() { close(l.stop) })
	l.hmu.Unlock()
	if l.running.Load() {
		select {
		case <-l.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	probes := make(chan struct{})
	go func() { l.probes.Wait(); close(probes) }() // ends within RPCTimeout
	select {
	case <-probes:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Units returns the units this node holds on key now, spendable without
// asking its owner. Safe for concurrent use.
func (l *Link) Units(key string) int64 {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	return l.h.Units(key, l.monoNow())
}

// Running reports whether Run has started (it stays true after Run
// returns). Safe for concurrent use.
func (l *Link) Running() bool { return l.running.Load() }
