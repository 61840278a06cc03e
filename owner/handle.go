package owner

import (
	"context"
	"errors"
	"sync"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/peer"
)

var _ peer.Handler = (*Owner)(nil)

// HandleDecide answers work forwarded by peers: it decides the items this
// node owns and names the owner it believes in for the rest. Put a
// intake.Validator in front of it: it trusts its items' shape, numbers and Defs.
//
// The sender gives up at its forward deadline and counts that against this
// node's breaker, which would then fail every group this node owns. So the
// answer must arrive in time even when Redis is slow: work that needs Redis
// stops a quarter of the sender's remaining time early and the item answers
// with its error and failure reason, and items that need Redis are decided
// concurrently, so one slow load cannot hold back the items this node can
// decide from memory.
//
// An item with an Op, Reserve or concurrency keys gets a decide.Grant of
// its own, returned in its peer.Result.Grant (decideGrant fills it); plain
// items carry none.
func (o *Owner) HandleDecide(ctx context.Context, from string, items []decide.Request) []peer.Result {
	rctx, cancel := replyContext(ctx, o.clk)
	defer cancel()
	results := make([]peer.Result, len(items))
	type decider func(context.Context, *decide.Request, []gcra.Result) (gcra.Result, error)
	run := func(i int, with decider) {
		it := &items[i]
		out := make([]gcra.Result, len(it.Keys))
		agg, err := with(rctx, it, out)
		results[i] = peer.Result{Overall: agg, Results: out, Err: err, Grant: it.Grant}
		switch ue, ok := errors.AsType[*limiter.UnavailableError](err); {
		case ok:
			results[i].Reason = ue.Reason
		case err != nil && rctx.Err() != nil && ctx.Err() == nil:
			// The reply budget ran out while this node waited on Redis.
			results[i].Reason = "state_load_failed"
			if it.Strict {
				results[i].Reason = "redis_unavailable"
			}
		}
	}
	var slow sync.WaitGroup
	for i := range items {
		it := &items[i]
		// The epoch is read before the one ownership check of this
		// request on this node, so decideHeld needs no recheck (see
		// checkOwned).
		epoch := o.deps.Mem.Epoch()
		switch owner := o.deps.Ring.Owner(it.Group); {
		case owner != o.cfg.LocalName:
			results[i].NotOwner = owner
		case it.Debt:
			slow.Go(func() { results[i] = o.ChargeDebt(rctx, it) })
		case !plain(it):
			// An op, a reservation or permits: answered in a Grant of
			// its own, which the wire carries back.
			it.Grant = new(decide.Grant)
			slow.Go(func() { run(i, o.decideGrant) })
		case o.inMemory(epoch, it):
			run(i, func(ctx context.Context, r *decide.Request, out []gcra.Result) (gcra.Result, error) {
				return o.decideHeld(ctx, epoch, r, out)
			})
		default:
			slow.Go(func() { run(i, o.decideLocal) })
		}
	}
	slow.Wait()
	return results
}

// inMemory reports whether it can be decided from memory alone at epoch,
// with decideHeld: any item when there is no Redis; otherwise a fast item
// whose keys this node holds or swept (known), unless the node has just
// been frozen (decideLocal falls back until the heartbeat has reloaded).
func (o *Owner) inMemory(epoch uint64, it *decide.Request) bool {
	if o.deps.Redis == nil {
		return true
	}
	if it.Strict || o.thawPending() {
		return false
	}
	for i, k := range it.Keys {
		if !o.known(epoch, it.Group, k, span(it, i)) {
			return false
		}
	}
	return true
}

// replyContext ends a quarter of ctx's remaining time before ctx does,
// leaving that much for the answer to travel back. clk must be the clock
// ctx's deadline is on (the real one).
func replyContext(ctx context.Context, clk clock.Clock) (context.Context, context.CancelFunc) {
	d, ok := ctx.Deadline()
	if !ok {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, d.Add(-d.Sub(clk.Now())/4))
}
