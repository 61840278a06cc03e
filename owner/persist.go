package owner

import (
	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
)

// Sweep frees the rested keys of owner memory at now (on the TATs' time
// base) and returns how many it freed, remembering them so that their next
// decision needs no load from Redis while this node keeps owning them (see
// rested.Rule.Swept). Call it periodically instead of the memory's own
// Sweep. Safe for concurrent use.
// It also expires permits and forgets empty permit sets (sweepPermits),
// and expires reservations past their settle window (sweepReservations,
// not counted in the result).
func (o *Owner) Sweep(now int64) int {
	o.sweepReservations(now)
	n := o.sweepPermits(now)
	if o.rested == nil {
		return n + o.deps.Mem.Sweep(now)
	}
	epoch := o.deps.Mem.Epoch()
	return n + o.deps.Mem.SweepFunc(now, func(key string) { o.rested.Swept(epoch, key) })
}

// mustPersist reports whether a TAT of tat for a key of a limit with
// emission interval interval, admitted at now, must go to the write-behind.
// It need not while the key is at most PersistSlack units from rested:
// losing that TAT in a crash admits at most PersistSlack units more than
// the write-behind's own bound, because the TAT Redis holds is never later
// than the real one and the new owner resumes from the later of it and now.
func (o *Owner) mustPersist(tat, now, interval int64) bool {
	return tat-now > o.cfg.PersistSlack*interval
}

// markHeld hands the write-behind the TAT of every held key for which lost
// is true, so that keys mustPersist let go unpersisted reach Redis before a
// hand-off drops them.
func (o *Owner) markHeld(lost func(key string) bool) {
	if o.deps.WriteBehind == nil || o.cfg.PersistSlack == 0 {
		return
	}
	o.deps.Mem.Range(func(key string, tat int64) {
		if lost(key) {
			o.deps.WriteBehind.Mark(key, tat)
		}
	})
}

// known reports whether this owner can decide key of group at epoch without
// loading it: the memory holds it, or the key is rested (package rested:
// swept during epoch, or owned for longer than span and the margin; a
// negative span is unknown).
func (o *Owner) known(epoch uint64, group, key string, span int64) bool {
	return o.deps.Mem.Has(group, key) || (o.rested != nil && o.rested.Rested(epoch, key, span))
}

// span is how far an earlier owner's TAT of r's key i can run ahead of its
// last decision on it: twice the limit's span, since a settlement's excess
// may leave the TAT up to 2·B·T ahead (gcra.Settle's debt cap; every fast
// rate limit takes reservations), plus the lease TTL for a leasable key (a
// grant's write-through folds its units at the lease's expiry, see
// lease/design.md). Fallback debt never moves a TAT past the span
// (ChargeDebt). Unknown (-1) for a global key, decided at a regional share
// whose TATs are rescaled, and for a key without a limit (UpdateOwned).
func span(r *decide.Request, i int) int64 {
	def := r.Def(i)
	if i >= len(r.Limits) || r.Strict || (def != nil && def.Global) {
		return -1
	}
	s := settleReach(r.Limits[i])
	if def.Leasable() {
		s += def.Lease.TTL.Nanoseconds()
	}
	return s
}

// settleReach is the furthest ahead of now a TAT of limit l can be left by
// a decision or a settlement: min(2·B·T, gcra.MaxSpan), as gcra.Settle
// caps a settlement's debt.
func settleReach(l gcra.Limit) int64 {
	if s := l.Span(); s <= gcra.MaxSpan/2 {
		return 2 * s
	}
	return gcra.MaxSpan
}
