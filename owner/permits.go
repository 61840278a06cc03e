package owner

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/permit"
	"github.com/weirhq/weir/redisbackend"
	"github.com/weirhq/weir/reservation"
	"github.com/weirhq/weir/ticket"
)

// Permits is the part of Redis an owner persists concurrency keys' permit
// sets with (*redisbackend.Backend; redistest's in-memory twin in tests).
// LoadSets answers nil for a missing key and for one holding a TAT, and an
// error for bytes that are neither.
type Permits interface {
	LoadSets(ctx context.Context, keys []string) ([]*permit.Set, error)
	StoreSets(ctx context.Context, sets []redisbackend.PermitSet) error
}

var _ Permits = (*redisbackend.Backend)(nil)

// ErrStrictGrant refuses a strict request that asks for permits, a
// reservation or an op: strict limits are decided by the Redis script,
// which holds neither (policy check refuses strict concurrency limits, and
// the limiter refuses reserve on strict ones).
var ErrStrictGrant = errors.New("owner: a strict request cannot hold permits or reservations")

// plain reports whether r is a plain decision: no op, no reservation, no
// concurrency key. Those stay on decideLocal, allocating nothing new.
func plain(r *decide.Request) bool { return r.Op == nil && !r.Reserve && !r.HasConcurrency() }

// decideGrant decides a request that is not plain: an op on a token
// (release, renew: permits_ops.go; settle: settleOp), a decision with
// concurrency keys (decidePermits; its rate keys by decideAt, or
// decideReserve with Reserve), or a Reserve decision without concurrency
// keys (decideReserve). Each runs at the memory's epoch after the
// ownership recheck, as decideLocal does.
func (o *Owner) decideGrant(ctx context.Context, r *decide.Request, out []gcra.Result) (gcra.Result, error) {
	if r.Strict {
		return gcra.Result{}, ErrStrictGrant
	}
	switch {
	case r.Op != nil && r.Op.Kind == decide.OpSettle:
		return o.atEpoch(ctx, r, func(epoch uint64) (gcra.Result, error) {
			return gcra.Result{}, o.settleOp(ctx, epoch, r)
		})
	case r.Op != nil:
		return o.atEpoch(ctx, r, func(epoch uint64) (gcra.Result, error) {
			return gcra.Result{}, o.permitOp(ctx, epoch, r)
		})
	case r.HasConcurrency():
		return o.atEpoch(ctx, r, func(epoch uint64) (gcra.Result, error) {
			return o.decidePermits(ctx, epoch, r, out)
		})
	}
	return o.atEpoch(ctx, r, func(epoch uint64) (gcra.Result, error) {
		return o.decideReserve(ctx, epoch, r, out)
	})
}

// atEpoch runs f at the memory's epoch, read before the ownership recheck
// (see decideLocal), and starts over once when a drop refused it.
func (o *Owner) atEpoch(ctx context.Context, r *decide.Request, f func(epoch uint64) (gcra.Result, error)) (gcra.Result, error) {
	var (
		agg gcra.Result
		err error
	)
	for range 2 {
		if err = o.checkThawed(); err != nil {
			return gcra.Result{}, err
		}
		epoch := o.deps.Mem.Epoch()
		if err = o.checkOwned(r.Group); err != nil {
			return gcra.Result{}, err
		}
		if agg, err = f(epoch); !errors.Is(err, memstore.ErrStaleEpoch) {
			break
		}
	}
	return agg, staleAsMoving(r.Group, err)
}

// permitLimit is a concurrency key's gcra.Limit read as its permit bound.
func permitLimit(l gcra.Limit) permit.Limit {
	n, ttl := decide.PermitLimit(l)
	return permit.Limit{MaxInFlight: n, TTL: ttl}
}

// splitKeys returns the indexes of r's concurrency keys and of its rate keys.
func splitKeys(r *decide.Request) (conc, rate []int) {
	for i := range r.Keys {
		if d := r.Def(i); d != nil && d.Concurrency {
			conc = append(conc, i)
		} else {
			rate = append(rate, i)
		}
	}
	return conc, rate
}

// decidePermits decides r, which has concurrency keys, all or nothing:
// under the locks of its concurrency keys' sets, every Set.Check must
// admit, then the rate keys' decision (decideAt, or decideReserve), then
// every set commits one permit of r.Cost under one fresh id, written
// through to Redis before the answer. A denial changes nothing (its rate
// keys are reported as admitting: not evaluated); a failed write rolls
// the permits back and answers redis_unavailable, or, when rate keys were
// charged, ReasonPermitsUnavailable: their charge stays (conservative) and
// a reservation it made is dropped, charged as reserved.
func (o *Owner) decidePermits(ctx context.Context, epoch uint64, r *decide.Request, out []gcra.Result) (gcra.Result, error) {
	if len(r.Limits) != len(r.Keys) || len(out) != len(r.Keys) {
		return gcra.Result{}, fmt.Errorf("owner: %d keys, %d limits, %d results", len(r.Keys), len(r.Limits), len(out))
	}
	conc, rate := splitKeys(r)
	for _, i := range conc {
		if err := permitLimit(r.Limits[i]).Validate(); err != nil {
			return gcra.Result{}, fmt.Errorf("owner: key %q: %w", r.Keys[i], err)
		}
	}
	if r.Cost <= 0 {
		return gcra.Result{}, fmt.Errorf("owner: %w: got %d", permit.ErrInvalidCost, r.Cost)
	}
	entries, unlock, err := o.lockSets(ctx, epoch, r, conc)
	if err != nil {
		return gcra.Result{}, err
	}
	defer unlock()
	g := r.Grant
	if g == nil {
		g = new(decide.Grant) // the caller wants no token: the permit only counts until its TTL
	}
	g.InFlight = make([]int64, len(r.Keys))
	if !o.checkPermits(r, conc, entries, out, g) {
		o.countPermits(r, conc, "denied")
		for _, i := range rate {
			out[i] = gcra.Result{Allowed: true} // not evaluated: nothing was charged
		}
		return aggregate(out, conc), nil
	}
	if len(rate) > 0 { // Reserve with no rate key reserves nothing
		agg, err := o.decideRate(ctx, epoch, r, rate, out, g)
		if err != nil || !agg.Allowed {
			if err == nil {
				o.countPermits(r, conc, "denied")
				agg = aggregate(out, nil)
			}
			return agg, err
		}
	}
	var id permit.ID
	rand.Read(id[:]) // crypto/rand: the id is the caller's secret; never fails
	if err := o.commitPermits(ctx, r, conc, entries, id, out, g); err != nil {
		if len(rate) > 0 {
			o.forgetReservation(r, g)
			err = chargedError(err)
		}
		return gcra.Result{}, err
	}
	o.countPermits(r, conc, "acquired")
	return aggregate(out, nil), nil
}

// chargedError renames a failed write-through's redis_unavailable to
// limiter.ReasonPermitsUnavailable: the rate keys stay charged.
func chargedError(err error) error {
	var u *limiter.UnavailableError
	if errors.As(err, &u) && u.Reason == "redis_unavailable" {
		return &limiter.UnavailableError{Reason: limiter.ReasonPermitsUnavailable, Err: u.Err}
	}
	return err
}

// forgetReservation drops the reservation a failed request recorded (its
// token never reaches the caller): it stays charged as reserved.
func (o *Owner) forgetReservation(r *decide.Request, g *decide.Grant) {
	if g.Reservation == nil {
		return
	}
	if t, err := ticket.Decode(g.Reservation); err == nil {
		if rec, ok := o.reserve.table.Take(reservation.ID(t.ID), t.Group, t.Keys); ok {
			o.reserve.metrics.expired([]reservation.Record{rec})
		}
	}
	g.Reservation = nil
}

// checkPermits runs Set.Check on every concurrency key into out and g,
// and reports whether all admit. Entries are locked.
func (o *Owner) checkPermits(r *decide.Request, conc []int, entries []*permitEntry, out []gcra.Result, g *decide.Grant) bool {
	ok := true
	for j, i := range conc {
		e, lim := entries[j], permitLimit(r.Limits[i])
		e.limit, e.name = lim, r.Def(i).Name
		d, err := e.set.Check(r.Now, lim, r.Cost)
		if err != nil { // validated above
			d = permit.Decision{InFlight: e.set.InFlight()}
		}
		out[i] = permitResult(d, e, r.Now)
		g.InFlight[i] = e.set.InFlight()
		ok = ok && d.Allowed
	}
	return ok
}

// decideRate decides r's rate keys as one composite of their own (with
// Reserve, recording the reservation in g) and copies the results into
// out by index.
func (o *Owner) decideRate(ctx context.Context, epoch uint64, r *decide.Request, rate []int, out []gcra.Result, g *decide.Grant) (gcra.Result, error) {
	sub := *r
	sub.Keys, sub.Limits, sub.Defs = make([]string, len(rate)), make([]gcra.Limit, len(rate)), make([]*decide.Def, len(rate))
	for j, i := range rate {
		sub.Keys[j], sub.Limits[j], sub.Defs[j] = r.Keys[i], r.Limits[i], r.Def(i)
	}
	sub.Grant = g
	subOut := make([]gcra.Result, len(rate))
	var (
		agg gcra.Result
		err error
	)
	if r.Reserve {
		agg, err = o.decideReserve(ctx, epoch, &sub, subOut)
	} else {
		agg, err = o.decideAt(ctx, epoch, &sub, subOut, true, nil)
	}
	for j, i := range rate {
		out[i] = subOut[j]
	}
	return agg, err
}

// commitPermits commits id on every concurrency key, writes the sets
// through to Redis and fills g; on a failed write it releases them again.
func (o *Owner) commitPermits(ctx context.Context, r *decide.Request, conc []int, entries []*permitEntry, id permit.ID, out []gcra.Result, g *decide.Grant) error {
	for j, i := range conc {
		e := entries[j]
		d, err := e.set.Commit(r.Now, e.limit, id, r.Cost)
		if err != nil { // Check admitted under the same lock: unreachable
			o.rollback(r.Now, entries[:j], id)
			return fmt.Errorf("owner: commit permit on %q: %w", r.Keys[i], err)
		}
		e.last = max(e.last, d.Expiry)
		out[i] = permitResult(d, e, r.Now)
		g.InFlight[i] = d.InFlight
	}
	if err := o.storeSets(ctx, r.Now, r, conc, entries); err != nil {
		o.pm.storeErrors.WithLabelValues("acquire").Inc()
		o.rollback(r.Now, entries, id)
		for _, i := range conc {
			g.InFlight[i] = entries[slices.Index(conc, i)].set.InFlight()
		}
		if ctx.Err() != nil {
			return err
		}
		return &limiter.UnavailableError{Reason: "redis_unavailable", Err: err}
	}
	keys := make([]string, len(conc))
	for j, i := range conc {
		keys[j] = r.Keys[i]
	}
	tok, err := ticket.Encode(ticket.Ticket{Kind: ticket.Permit, Group: r.Group, Keys: keys, ID: id})
	if err != nil { // keys the public API accepted: unreachable
		o.rollback(r.Now, entries, id)
		return fmt.Errorf("owner: permit token: %w", err)
	}
	g.Permit = tok
	return nil
}

func (o *Owner) rollback(now int64, entries []*permitEntry, id permit.ID) {
	for _, e := range entries {
		e.set.Release(now, id)
	}
}

func (o *Owner) countPermits(r *decide.Request, conc []int, result string) {
	for _, i := range conc {
		o.pm.total.WithLabelValues(r.Def(i).Name, result).Inc()
	}
}

// permitResult is a concurrency key's gcra.Result: free slots as
// Remaining, the exact wait for enough permits to expire as RetryAfter,
// and the time until its last live permit expires (an upper bound once
// some were released) as ResetAfter; TAT 0.
func permitResult(d permit.Decision, e *permitEntry, now int64) gcra.Result {
	res := gcra.Result{Allowed: d.Allowed, TooCostly: d.TooCostly, Remaining: d.Remaining, RetryAfter: d.RetryAfter}
	if e.set.Len() > 0 {
		res.ResetAfter = max(e.last-now, 0)
	}
	return res
}

// aggregate is gcra.DecideComposite's aggregate over out at idx (nil:
// all): allowed when all allow, the largest RetryAfter (0 when one is too
// costly) and ResetAfter, the smallest Remaining.
func aggregate(out []gcra.Result, idx []int) gcra.Result {
	agg := gcra.Result{Allowed: true, Remaining: -1}
	visit := func(r gcra.Result) {
		agg.Allowed = agg.Allowed && r.Allowed
		agg.TooCostly = agg.TooCostly || r.TooCostly
		agg.RetryAfter, agg.ResetAfter = max(agg.RetryAfter, r.RetryAfter), max(agg.ResetAfter, r.ResetAfter)
		if agg.Remaining < 0 || r.Remaining < agg.Remaining {
			agg.Remaining = r.Remaining
		}
	}
	if idx == nil {
		for _, r := range out {
			visit(r)
		}
	} else {
		for _, i := range idx {
			visit(out[i])
		}
	}
	if agg.TooCostly {
		agg.RetryAfter = 0
	}
	agg.Remaining = max(agg.Remaining, 0)
	return agg
}
