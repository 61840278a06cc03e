package owner

import (
	"context"
	"errors"
	"fmt"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/peer"
)

// ChargeDebt is the owner's side of fallback debt (package forward keeps
// the sender's): it charges r.Cost units to r's one fast key, never moving
// the TAT past now + span. The cap keeps every charged unit a unit the key
// cannot admit within the window that holds the charge; debt beyond a full
// burst is forgiven. The answer's Overall is the key's state after the
// charge. HandleDecide calls it for items with Debt set; the forwarding
// layer for debts this node owes itself. See docs/operations.md, "Fallback
// allowance". Safe for concurrent use.
func (o *Owner) ChargeDebt(ctx context.Context, r *decide.Request) peer.Result {
	if len(r.Keys) != 1 || len(r.Limits) != 1 || r.Cost <= 0 || r.Strict || r.Limits[0].Validate() != nil {
		return peer.Result{Err: fmt.Errorf("owner: malformed debt item for group %q: %d keys, %d limits, cost %d, strict %v",
			r.Group, len(r.Keys), len(r.Limits), r.Cost, r.Strict)}
	}
	epoch := o.deps.Mem.Epoch()
	if err := o.checkOwned(r.Group); err != nil { // the recheck at epoch: see checkOwned
		return peer.Result{Err: err}
	}
	if err := o.ensureLoaded(ctx, epoch, r); err != nil {
		res := peer.Result{Err: err}
		if ue, ok := errors.AsType[*limiter.UnavailableError](err); ok {
			res.Reason = ue.Reason
		}
		return res
	}
	charge := *r
	charge.Debt = false
	out := make([]gcra.Result, 1)
	var charged int64
	// A decision of cost n succeeds exactly when n units fit before the TAT
	// reaches now + span, at the limit the key is decided at (a global
	// key's regional share). A concurrent decision, or a share change, may
	// take room between the look and the charge; then look again.
	for range 3 {
		n := min(r.Cost, o.debtRoom(epoch, &charge))
		if n == 0 {
			break
		}
		charge.Cost = n
		agg, err := o.decideHeld(ctx, epoch, &charge, out)
		if err != nil {
			return peer.Result{Err: err}
		}
		if agg.Allowed {
			charged = n
			break
		}
	}
	o.debt.WithLabelValues("charged").Add(float64(charged))
	if forgiven := r.Cost - charged; forgiven > 0 {
		o.debt.WithLabelValues("forgiven").Add(float64(forgiven))
	}
	tat := max(o.deps.Mem.Get(r.Group, r.Keys[0]), r.Now)
	after := gcra.Result{Allowed: true, TAT: tat, Remaining: o.debtRoom(epoch, &charge), ResetAfter: tat - r.Now}
	return peer.Result{Overall: after, Results: []gcra.Result{after}}
}

// debtRoom is the room of r's one key, now, at the limit its decisions
// enforce: r.Limits[0], or this region's share of it for a global key
// (whose TAT regionLimits first rescales to that share, as a decision
// would). A share that admits nothing has no room.
func (o *Owner) debtRoom(epoch uint64, r *decide.Request) int64 {
	look := *r
	look.Cost = 0 // a look, not demand
	limits, ok, release := o.regionLimits(epoch, &look)
	defer release()
	if !ok {
		return 0
	}
	return room(o.deps.Mem.Get(r.Group, r.Keys[0]), r.Now, limits[0])
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
