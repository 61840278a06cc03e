package owner

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/redisbackend"
)

// redisBreaker names the breaker that guards the owner's Redis calls.
const redisBreaker = "redis"

// ReasonMemoryFull is the failure reason when the owner's memory holds
// --max-keys live keys and a request needs a new one.
const ReasonMemoryFull = "memory_full"

// ReasonStrictQueueFull is the failure reason of a strict decision refused
// because too many were waiting for Redis (redisbackend.ErrStrictQueueFull).
const ReasonStrictQueueFull = "strict_queue_full"

// decideLocal decides r as its group's owner.
//
// A hand-off can drop r's keys at any point after the caller found this
// node the owner: between the load and the decision, or during the load.
// So the decision reads the memory's epoch, then rechecks ownership
// (decideOwned), and the store refuses (memstore.ErrStaleEpoch) to load or
// decide absent keys once the epoch has moved. A refused decision starts
// over once: the epoch moves on every drop, not only those of r's group.
func (o *Owner) decideLocal(ctx context.Context, r *decide.Request, out []gcra.Result) (gcra.Result, error) {
	if r.Strict && o.deps.Strict != nil {
		return o.decideStrict(ctx, r, out)
	}
	var (
		agg gcra.Result
		err error
	)
	for range 2 {
		if err = o.checkThawed(); err != nil { // a thaw also moves the epoch
			return gcra.Result{}, err
		}
		epoch := o.deps.Mem.Epoch()
		if err = o.checkOwned(r.Group); err != nil {
			return gcra.Result{}, err
		}
		if agg, err = o.decideAt(ctx, epoch, r, out, true, nil); !errors.Is(err, memstore.ErrStaleEpoch) {
			break
		}
	}
	return agg, staleAsMoving(r.Group, err)
}

// checkOwned is the owner's deliberate recheck of ownership, made after
// reading the memory's epoch. The forwarding layer routed the request
// before that (its Route may be older than the epoch): a ring change and
// its hand-off can land in between. Checking again once the epoch is read
// orders the check against the drop: either the ring changed before the
// read, and the check refuses, or the drop comes after it and moves the
// epoch, and the store refuses to load or decide absent keys at the old
// one. Without the recheck a decision could re-create a key just handed
// off, on the node that gave its group away.
func (o *Owner) checkOwned(group string) error {
	if owner := o.deps.Ring.Owner(group); owner != o.cfg.LocalName {
		return movingError(group, owner)
	}
	return nil
}

// decideHeld decides a fast r from the TATs in memory (all of r's keys
// were held, or known missing without Redis, when the memory was at epoch)
// and marks what it admitted for write-behind. epoch must be read before
// the caller checked ownership and looked for the keys: a drop since then
// moves the epoch, and an absent key is then refused instead of being read
// as rested. It does not start over when a drop refuses it: it would have
// to load, and its callers chose it because nothing needs loading.
func (o *Owner) decideHeld(ctx context.Context, epoch uint64, r *decide.Request, out []gcra.Result) (gcra.Result, error) {
	agg, err := o.decideAt(ctx, epoch, r, out, false, nil)
	return agg, staleAsMoving(r.Group, err)
}

// decideAt loads r's missing keys if load is set, and decides r from
// memory at epoch, marking what it admitted for write-behind. The caller
// read epoch, then checked that this node owns r.Group (checkOwned).
// capture, when not nil, sees each key's TAT after the lease ledger's
// adjustment and may adjust it further (decideReserve records them);
// plain decisions pass nil.
func (o *Owner) decideAt(ctx context.Context, epoch uint64, r *decide.Request, out []gcra.Result, load bool, capture memstore.Adjust) (gcra.Result, error) {
	if load {
		if err := o.ensureLoaded(ctx, epoch, r); err != nil {
			return gcra.Result{}, err
		}
	}
	limits, ok, release := o.regionLimits(epoch, r)
	defer release()
	if !ok {
		return o.shareDenied(r, out), nil
	}
	// With leases out, decide on the ledger's Effective TATs. The hook is
	// made here, not in a helper, so that it lives on this frame's stack:
	// a decision allocates nothing for it.
	var adj memstore.Adjust
	if l := o.leases; l != nil && l.Active() {
		group, now := r.Group, r.Now
		adj = func(key string, tat int64) int64 { return l.Effective(group, key, tat, now) }
	}
	if capture != nil {
		lease := adj
		adj = func(key string, tat int64) int64 {
			if lease != nil {
				tat = lease(key, tat)
			}
			return capture(key, tat)
		}
	}
	agg, err := o.deps.Mem.DecideAdjusted(ctx, epoch, r.Group, r.Keys, limits, r.Cost, r.Now, out, adj)
	if errors.Is(err, memstore.ErrFull) {
		return agg, &limiter.UnavailableError{Reason: ReasonMemoryFull, Err: err}
	}
	if err != nil || !agg.Allowed {
		return agg, err
	}
	o.markAdmitted(r, limits, out)
	return agg, nil
}

// markAdmitted hands the write-behind the TATs of an admitted decision
// that mustPersist keeps.
func (o *Owner) markAdmitted(r *decide.Request, limits []gcra.Limit, out []gcra.Result) {
	if o.deps.WriteBehind == nil {
		return
	}
	for i, k := range r.Keys {
		if o.mustPersist(out[i].TAT, r.Now, limits[i].Interval) {
			o.deps.WriteBehind.Mark(k, out[i].TAT)
		}
	}
}

// staleAsMoving turns a decision refused for a stale epoch into the
// retryable ownership_changing fallback: r's keys were dropped while it
// ran, so ownership is moving (or state is being reloaded). It does not
// look the owner up again: the reason is what the sender acts on.
func staleAsMoving(group string, err error) error {
	if !errors.Is(err, memstore.ErrStaleEpoch) {
		return err
	}
	return &limiter.UnavailableError{Reason: "ownership_changing", Err: fmt.Errorf("owner: group %q is moving (its keys were dropped during the decision)", group)}
}

func movingError(group, owner string) error {
	return &limiter.UnavailableError{Reason: "ownership_changing", Err: fmt.Errorf("owner: group %q is moving to %s", group, owner)}
}

// ensureLoaded loads from Redis the TATs of r's keys that this owner
// neither holds nor knows rested (known), so that no key starts from a
// full burst while Redis remembers it. Concurrent first touches may both
// load; Put keeps the later TAT, so that costs a read, never correctness.
// It returns memstore.ErrStaleEpoch when keys were dropped since epoch:
// the load may predate the hand-off, and this node may no longer own the
// keys.
func (o *Owner) ensureLoaded(ctx context.Context, epoch uint64, r *decide.Request) error {
	if o.deps.Redis == nil {
		return nil
	}
	group, now := r.Group, r.Now
	var missing []string
	for i, k := range r.Keys {
		if !o.known(epoch, group, k, span(r, i)) {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if !o.deps.Mem.Room(group, len(missing), now) {
		return &limiter.UnavailableError{Reason: ReasonMemoryFull, Err: memstore.ErrFull}
	}
	done, err := o.guard(redisBreaker)
	if err != nil {
		return &limiter.UnavailableError{Reason: "state_load_failed", Err: err}
	}
	lctx, cancel := context.WithTimeout(ctx, o.cfg.LoadTimeout)
	defer cancel()
	tats, err := o.deps.Redis.LoadTATs(lctx, missing)
	done(blame(ctx, err))
	o.metrics.loads.Inc()
	o.metrics.redisCommands.WithLabelValues("load_tats").Inc()
	if err != nil {
		o.metrics.loadErrors.Inc()
		if ctx.Err() != nil {
			return err
		}
		return &limiter.UnavailableError{Reason: "state_load_failed", Err: err}
	}
	for i, k := range missing {
		if !o.deps.Mem.PutAt(epoch, group, k, tats[i]) {
			return memstore.ErrStaleEpoch
		}
	}
	return nil
}

// decideStrict decides r through the Redis script, batched with other
// strict requests in flight. Redis's own clock decides (now = 0).
func (o *Owner) decideStrict(ctx context.Context, r *decide.Request, out []gcra.Result) (gcra.Result, error) {
	limits, ok := o.strictRegionLimits(r) // a copy
	if !ok {
		return o.shareDenied(r, out), nil
	}
	done, err := o.guard(redisBreaker)
	if err != nil {
		return gcra.Result{}, &limiter.UnavailableError{Reason: "redis_unavailable", Err: err}
	}
	o.metrics.redisCommands.WithLabelValues("decide_strict").Inc()
	// Copies: the queue may send the request after ctx ends and this
	// returns, and the limiter reuses r (limiter.Store).
	d, err := o.deps.Strict.Decide(ctx, redisbackend.DecideRequest{Keys: slices.Clone(r.Keys), Limits: limits, Cost: r.Cost})
	done(blame(ctx, err)) // a full queue counts too: Redis is not keeping up
	if err != nil {
		if ctx.Err() != nil {
			return gcra.Result{}, err
		}
		if errors.Is(err, redisbackend.ErrStrictQueueFull) {
			return gcra.Result{}, &limiter.UnavailableError{Reason: ReasonStrictQueueFull, Err: err}
		}
		return gcra.Result{}, &limiter.UnavailableError{Reason: "redis_unavailable", Err: err}
	}
	if len(d.Results) != len(out) {
		return gcra.Result{}, fmt.Errorf("owner: redis answered %d results for %d limits", len(d.Results), len(out))
	}
	copy(out, d.Results)
	return d.Overall, nil
}
