package gcra

import (
	"errors"
	"fmt"
	"math"
)

// ErrInvalidSettle is returned by Settle for a negative actual cost or a
// reservation that no admitted Reserve returned.
var ErrInvalidSettle = errors.New("gcra: invalid settlement")

// Reservation is what an admitted reserving decision must remember to be
// settled later: where its units sit on the key's schedule.
type Reservation struct {
	// At is the decision's now (clamped as Decide clamps it).
	At int64
	// Start is where its units began: max(TAT before it, At).
	Start int64
	// Cost is the units reserved (charged up front), > 0.
	Cost int64
	// Shift is the key's shift counter when it was made (see Settle).
	Shift int64
}

// Settlement is the outcome of Settle.
type Settlement struct {
	// TAT is the key's new TAT; Shift its new shift counter. Store both.
	TAT, Shift int64
	// Refunded is the units given back (actual below the reservation).
	Refunded int64
	// Kept is the units of a refund not given back: the key had already
	// rested past them, or later decisions rely on them (see Settle).
	Kept int64
	// Extra is the units charged beyond the reservation (actual above).
	Extra int64
	// Forgiven is the units of the excess not charged: the debt cap.
	Forgiven int64
}

// Reserve is Decide for a cost that will be settled later: it admits or
// denies exactly as Decide does and, when admitted, returns the
// Reservation to pass to Settle. shift is the key's shift counter.
func Reserve(tat, shift, now int64, l Limit, cost int64) (Result, Reservation, error) {
	res, err := Decide(tat, now, l, cost)
	if err != nil || !res.Allowed {
		return res, Reservation{}, err
	}
	return res, ReservationOf(tat, shift, now, cost), nil
}

// ReservationOf is the Reservation of a decision of cost at now that was
// admitted against a key whose TAT was tatBefore, for callers that decide
// with DecideComposite (one Reservation per limit).
func ReservationOf(tatBefore, shift, now, cost int64) Reservation {
	now = min(max(now, 0), MaxTime)
	return Reservation{At: now, Start: max(tatBefore, now), Cost: cost, Shift: shift}
}

// Settle charges a reservation its actual cost at now: it refunds the
// unused part (actual < r.Cost) or charges the excess (actual > r.Cost).
// tat and shift are the key's state now; store the returned ones.
//
// The invariant. Read GCRA as a schedule: each admitted decision of cost c
// at time t occupies [s, s+c·T) with s = max(TAT, t) >= t, ends by t + B·T
// (the admission rule), and no two overlap; every interval ends by TAT.
// Any decisions admitted in a window [a, b] then occupy disjoint time
// within [a, b+B·T], so their cost is at most B + (b−a)/T. A refund keeps
// that picture true with each reservation counted at its actual cost:
//
//	over every window [a, b], the admitted cost minus the units refunded
//	to the decisions admitted in it is at most B + (b−a)/T, exactly.
//
// It shrinks the reservation's interval to its first actual·T, and moves
// every interval after it back by the refund into the freed tail. An
// interval may not start before its decision's time, and the later ones
// were decided by now, so the refund is at most the part of the freed
// tail that lies after now: it is capped at (end − now)/T units, where end
// is a lower bound of where the reservation's interval ends today,
// max(r.Start − moved, r.At) + r.Cost·T, and moved is how far refunds
// since it (of reservations before it) may have moved it: the key's shift
// counter minus r.Shift. That cap is what the decisions admitted after the
// reservation need. A key that rested since (end <= now) gets no refund:
// the units came back with time. Kept reports what was not refunded.
//
// The shift counter adds up, modulo 2^64, the time refunds moved the key's
// TAT back. Keep it beside the TAT while the key has open reservations. A
// key whose counter was lost must start from a fresh random value: a
// reservation older than the counter then reads as moved arbitrarily far
// and is refunded only up to (r.At + r.Cost·T − now)/T, still safe.
//
// The excess is charged as a decision would be, without the admission
// test: the key may go into debt, later requests wait. The debt is capped:
// the TAT never goes past now + 2·B·T (or now + MaxSpan if smaller), at
// most one burst beyond an empty bucket, so a request of cost 1 never
// waits more than B·T + T after a settlement; what the cap leaves out is
// Forgiven. Excess units are not admitted decisions and not part of the
// bound above; they only delay later ones.
//
// now must not be earlier than the decisions already made on this key (the
// owner's stamps): a settlement δ behind them can refund up to δ/T units
// more than the bound allows. actual = r.Cost changes nothing. A negative
// actual, or a Reservation no Reserve returned (a zero one, Start before
// At, a cost above MaxSpan/T), is ErrInvalidSettle; an error changes
// nothing. The limit is the one in force now: a reservation made under
// another rate is settled in today's units.
func Settle(tat, shift, now int64, l Limit, r Reservation, actual int64) (Settlement, error) {
	if err := l.Validate(); err != nil {
		return Settlement{}, err
	}
	if actual < 0 || r.Cost <= 0 || r.Cost > MaxSpan/l.Interval || r.At < 0 || r.At > MaxTime ||
		r.Start < r.At || r.Start-r.At > MaxSpan {
		return Settlement{}, fmt.Errorf("%w: actual %d of reservation %+v", ErrInvalidSettle, actual, r)
	}
	return settle(tat, shift, now, l, r, actual, r.endBound(shift, l)), nil
}

// endBound is the earliest the reservation's interval can end now.
func (r Reservation) endBound(shift int64, l Limit) int64 {
	start := r.At
	if moved := uint64(shift) - uint64(r.Shift); moved < uint64(r.Start-r.At) {
		start = r.Start - int64(moved)
	}
	if need := r.Cost * l.Interval; start <= math.MaxInt64-need {
		return start + need
	}
	return math.MaxInt64
}

// settle assumes valid input; end bounds where the reservation's interval
// ends (tests pass a wrong one to show the bound needs it).
func settle(tat, shift, now int64, l Limit, r Reservation, actual, end int64) Settlement {
	now = min(max(now, 0), MaxTime)
	out := Settlement{TAT: tat, Shift: shift}
	if actual < r.Cost {
		unused := r.Cost - actual
		ahead := max(tat, now) - now // the refund never moves TAT before now
		units := min(unused, max(end-now, 0)/l.Interval, ahead/l.Interval)
		out.TAT -= units * l.Interval
		out.Shift = int64(uint64(shift) + uint64(units*l.Interval))
		out.Refunded, out.Kept = units, unused-units
		return out
	}
	excess := actual - r.Cost
	ahead := max(tat, now) - now
	maxAhead := l.Span() + min(l.Span(), MaxSpan-l.Span())
	units := min(excess, max(maxAhead-ahead, 0)/l.Interval)
	if units > 0 {
		out.TAT = now + ahead + units*l.Interval
	}
	out.Extra, out.Forgiven = units, excess-units
	return out
}
