package owner

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/reservation"
	"github.com/weirhq/weir/ticket"
)

// Reservations, owner side (issue 26): an admitted Reserve decision leaves
// a record in the owner's reservation.Table (one gcra.Reservation per rate
// key); a Settle takes it and applies gcra.Settle to each key under the
// key's memstore lock. Records live in memory only: a crash or hand-off
// loses them, and what was not settled stays charged as reserved.
//
// Lock order: a key's memstore shard lock, then the table's mutex (the
// table is read under the shard lock: Pin in the decision's Adjust hook,
// Shift and SetShift in the settlement's UpdateAt). The table never calls
// out, so nothing takes them the other way round.

// ReasonReservationsFull is the failure reason of a Reserve refused
// because the node holds reservation.Config.MaxRecords open records.
const ReasonReservationsFull = "reservations_full"

// reserveState is what an Owner keeps for reservations.
type reserveState struct {
	table   *reservation.Table
	metrics *reserveMetrics
}

// newReserveState returns an empty table whose fresh shift counters come
// from a ChaCha8 source seeded from crypto/rand (the table calls it under
// its mutex).
func newReserveState(cfg reservation.Config, reg prometheus.Registerer) (reserveState, error) {
	var seed [32]byte
	_, _ = crand.Read(seed[:]) // never fails (crypto/rand.Read's contract)
	t, err := reservation.New(cfg, rand.NewChaCha8(seed))
	if err != nil {
		return reserveState{}, fmt.Errorf("owner: %w", err)
	}
	m, err := newReserveMetrics(reg)
	if err != nil {
		return reserveState{}, err
	}
	return reserveState{table: t, metrics: m}, nil
}

// decideReserve is decideAt for r.Reserve: it decides r's rate keys from
// memory at epoch (loading as decideAt does) and, when admitted, records a
// reservation and sets r.Grant.Reservation (a ticket.Reservation token
// over r's keys) when r.Grant != nil. r must hold only rate keys: the
// caller decides a composite's concurrency keys itself. A full table
// refuses before anything is charged (ReasonReservationsFull). Like
// decideAt it returns memstore.ErrStaleEpoch unwrapped, for the caller to
// retry at a new epoch or turn into ownership_changing.
// It decides through decideAt with a capture hook, which reads each key's
// TAT and shift counter inside the decision's lock.
func (o *Owner) decideReserve(ctx context.Context, epoch uint64, r *decide.Request, out []gcra.Result) (gcra.Result, error) {
	if err := checkReserve(r); err != nil {
		return gcra.Result{}, err
	}
	var id reservation.ID
	_, _ = crand.Read(id[:]) // a zero id (p = 2^-128) is refused by Encode and Put
	var token []byte
	if r.Grant != nil {
		var err error
		if token, err = ticket.Encode(ticket.Ticket{Kind: ticket.Reservation, Group: r.Group, Keys: r.Keys, ID: id}); err != nil {
			return gcra.Result{}, fmt.Errorf("owner: reservation token: %w", err)
		}
	}
	t := o.reserve.table
	if !t.Claim() {
		return gcra.Result{}, &limiter.UnavailableError{Reason: ReasonReservationsFull, Err: reservation.ErrFull}
	}
	claimed := true
	defer func() {
		if claimed {
			t.Unclaim()
		}
	}()
	c := o.newCapture(r)
	defer c.unpin()
	agg, err := o.decideAt(ctx, epoch, r, out, true, c.adjust)
	if err != nil || !agg.Allowed {
		return agg, err
	}
	if c.calls != len(r.Keys) || c.pinned != len(r.Keys) {
		// Not reached: memstore reads each key once, in order. The
		// decision stands, but without its TATs it cannot be recorded.
		o.logger.Error("reservation not recorded: the decision read its keys out of order", "group", r.Group)
		return agg, nil
	}
	// No key is global (checkReserve): the decision used r.Limits.
	if claimed = !o.record(r, id, r.Limits, c); !claimed && r.Grant != nil {
		r.Grant.Reservation = token
	}
	return agg, nil
}

// checkReserve refuses a request decideReserve cannot record.
func checkReserve(r *decide.Request) error {
	switch {
	case !r.Reserve || r.Op != nil || r.Debt:
		return errors.New("owner: not a reserve decision")
	case r.Strict:
		return errors.New("owner: strict limits cannot reserve")
	case slices.ContainsFunc(r.Defs, func(d *decide.Def) bool { return d != nil && d.Global }):
		// A global key's TAT is kept in its region's moving share: a
		// reservation could not be settled in the units it was made in.
		return errors.New("owner: global limits cannot reserve")
	case r.HasConcurrency():
		return errors.New("owner: a reserve decision decides rate keys only")
	case len(r.Keys) != len(r.Limits):
		return fmt.Errorf("owner: %d keys for %d limits", len(r.Keys), len(r.Limits))
	}
	return nil
}

// capture is a reserve decision's Adjust hook, which decideAt composes
// after the lease ledger's Effective TAT: it remembers, under the key's
// lock, the TAT the decision uses and the key's shift counter (pinned
// until unpin, so it outlives a settlement of the key's last other record
// before this one is put).
type capture struct {
	t             *reservation.Table
	keys          []string
	tats, shifts  []int64
	calls, pinned int
	adjust        memstore.Adjust
}

func (o *Owner) newCapture(r *decide.Request) *capture {
	c := &capture{t: o.reserve.table, keys: r.Keys, tats: make([]int64, len(r.Keys)), shifts: make([]int64, len(r.Keys))}
	c.adjust = func(key string, tat int64) int64 {
		if i := c.calls; i == c.pinned && i < len(c.keys) && c.keys[i] == key {
			c.tats[i], c.shifts[i] = tat, c.t.Pin(key)
			c.pinned++
		}
		c.calls++
		return tat
	}
	return c
}

func (c *capture) unpin() {
	for _, k := range c.keys[:c.pinned] {
		c.t.Unpin(k)
	}
}

// record puts r's reservation in the table and counts it; false when the
// table refused it (not reached: the claim and the limits were checked).
func (o *Owner) record(r *decide.Request, id reservation.ID, limits []gcra.Limit, c *capture) bool {
	rec := reservation.Record{ID: id, Group: r.Group, Keys: make([]reservation.Key, len(r.Keys)), Expiry: expiry(r)}
	for i, k := range r.Keys {
		rec.Keys[i] = reservation.Key{Key: k, Name: defName(r, i), Limit: limits[i],
			Res: gcra.ReservationOf(c.tats[i], c.shifts[i], r.Now, r.Cost)}
	}
	evicted, err := o.reserve.table.Put(rec)
	if err != nil {
		o.logger.Error("reservation not recorded", "group", r.Group, "err", err)
		return false
	}
	o.reserve.metrics.reserved(rec)
	o.reserve.metrics.expired(evicted)
	return true
}

// expiry is when r's reservation may no longer be settled: r.Now plus the
// shortest ReserveTTL of its limits (decide.DefaultReserveTTL when unset).
func expiry(r *decide.Request) int64 {
	ttl := int64(0)
	for i := range r.Keys {
		if d := r.Def(i); d != nil && d.ReserveTTL > 0 && (ttl == 0 || d.ReserveTTL < ttl) {
			ttl = d.ReserveTTL
		}
	}
	if ttl == 0 {
		ttl = decide.DefaultReserveTTL
	}
	now := min(max(r.Now, 0), gcra.MaxTime)
	return now + min(ttl, gcra.MaxSpan) // <= MaxInt64
}

func defName(r *decide.Request, i int) string {
	if d := r.Def(i); d != nil {
		return d.Name
	}
	return ""
}

// settleOp applies r.Op (OpSettle, Actual) to the reservation r.Op.ID over
// r's keys and fills r.Grant (Done, Settlement) when it is set. Unknown or
// expired id (its Expiry at or before r.Now, swept or not), or one named with other keys or group than it was made on:
// Done=false, nil error, nothing changes. A negative Actual, or one above
// gcra.MaxSpan/Interval of a key's limit, is an error wrapping
// gcra.ErrInvalidSettle, and nothing changes.
//
// The caller read epoch, then checked that this node owns r.Group, as for
// decideAt. Each key is settled with gcra.Settle under its memstore lock
// at epoch (UpdateAt) against the limit its reservation was decided at,
// with the key's shift counter, and the TAT it leaves is marked for the
// write-behind as a decision's is. A drop since epoch refuses the keys not
// yet settled with the retryable ownership_changing error: the record is
// gone then, the keys settled so far stay settled, the rest stay charged
// as reserved (each key's refund is safe on its own).
//
// Grant.Settlement sums up the keys as decide.Grant says: Refunded is the
// fewest units refunded on any key, Kept, Extra and Forgiven the most.
func (o *Owner) settleOp(ctx context.Context, epoch uint64, r *decide.Request) error {
	id, actual, err := checkSettle(r)
	if err != nil {
		return err
	}
	t := o.reserve.table
	grant := r.Grant
	if grant == nil {
		grant = &decide.Grant{}
	}
	grant.Done, grant.Settlement = false, gcra.Settlement{}
	rec, ok := t.Get(id)
	if ok {
		if err := checkActual(rec, actual); err != nil {
			return err
		}
		if err := o.ensureLoaded(ctx, epoch, r); err != nil {
			return staleAsMoving(r.Group, err) // the record stays open
		}
		rec, ok = t.Take(id, r.Group, r.Keys)
	}
	if !ok {
		o.reserve.metrics.unknown(r)
		return nil
	}
	defer t.Done(rec)
	if rec.Expiry <= r.Now { // expired, not yet swept: as if it had been
		o.reserve.metrics.expired([]reservation.Record{rec})
		return nil
	}
	var sum gcra.Settlement
	for i, k := range rec.Keys {
		s, err := o.settleKey(epoch, r, k, actual)
		if err != nil {
			return settleFailed(r.Group, err)
		}
		if i == 0 || s.Refunded < sum.Refunded {
			sum.Refunded = s.Refunded
		}
		sum.Kept, sum.Extra, sum.Forgiven = max(sum.Kept, s.Kept), max(sum.Extra, s.Extra), max(sum.Forgiven, s.Forgiven)
		o.reserve.metrics.settled(k, s)
	}
	grant.Done, grant.Settlement = true, sum
	return nil
}

// checkSettle refuses an op settleOp cannot apply.
func checkSettle(r *decide.Request) (reservation.ID, int64, error) {
	switch {
	case r.Op == nil || r.Op.Kind != decide.OpSettle:
		return reservation.ID{}, 0, errors.New("owner: not a settle op")
	case r.Op.Actual < 0:
		return reservation.ID{}, 0, fmt.Errorf("owner: %w: actual %d is negative", gcra.ErrInvalidSettle, r.Op.Actual)
	}
	return reservation.ID(r.Op.ID), r.Op.Actual, nil
}

// checkActual bounds actual by each key's limit: no key can be charged
// more than gcra.MaxSpan of time.
func checkActual(rec reservation.Record, actual int64) error {
	for _, k := range rec.Keys {
		if actual > gcra.MaxSpan/k.Limit.Interval {
			return fmt.Errorf("owner: %w: actual %d exceeds %d for %s", gcra.ErrInvalidSettle, actual, gcra.MaxSpan/k.Limit.Interval, k.Key)
		}
	}
	return nil
}

// settleKey settles k's part of a reservation under the key's lock.
func (o *Owner) settleKey(epoch uint64, r *decide.Request, k reservation.Key, actual int64) (gcra.Settlement, error) {
	var s gcra.Settlement
	t := o.reserve.table
	err := o.deps.Mem.UpdateAt(epoch, r.Group, k.Key, r.Now, func(tat int64, _ bool) (int64, error) {
		shift, _ := t.Shift(k.Key) // pinned by Take
		var err error
		// A settle stamped by a node whose clock runs behind the
		// reservation's own may refund up to the skew over T more than
		// the bound (gcra.Settle): never settle before the reservation.
		if s, err = gcra.Settle(tat, shift, max(r.Now, k.Res.At), k.Limit, k.Res, actual); err != nil {
			return 0, err
		}
		t.SetShift(k.Key, s.Shift)
		return s.TAT, nil
	})
	if err == nil && o.deps.WriteBehind != nil && o.mustPersist(s.TAT, r.Now, k.Limit.Interval) {
		o.deps.WriteBehind.Mark(k.Key, s.TAT)
	}
	return s, err
}

// settleFailed is the error of a settlement a key refused.
func settleFailed(group string, err error) error {
	if errors.Is(err, memstore.ErrFull) {
		return &limiter.UnavailableError{Reason: ReasonMemoryFull, Err: err}
	}
	return staleAsMoving(group, err)
}

// sweepReservations expires the reservations whose settle window ended by
// now (charged as reserved) and returns how many. The owner's Sweep calls
// it, on the decisions' time base.
func (o *Owner) sweepReservations(now int64) int {
	expired := o.reserve.table.Sweep(now)
	o.reserve.metrics.expired(expired)
	return len(expired)
}

// dropReservations forgets the reservations on keys for which lost is
// true (a hand-off: records are not persisted) and returns how many,
// counted as expired. Drop calls it after the memory's DeleteFunc.
func (o *Owner) dropReservations(lost func(key string) bool) int {
	dropped := o.reserve.table.DeleteFunc(lost)
	o.reserve.metrics.expired(dropped)
	return len(dropped)
}
