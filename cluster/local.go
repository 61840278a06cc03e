package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"

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

// decideLocal decides r as its group's owner.
//
// A hand-off can drop r's keys at any point after the caller found this
// node the owner: between the load and the decision, or during the load.
// So the decision reads the memory's epoch, then checks ownership, and the
// store refuses (memstore.ErrStaleEpoch) to load or decide absent keys once
// the epoch has moved. A refused decision starts over once: the epoch moves
// on every drop, not only those of r's group.
func (c *Cluster) decideLocal(ctx context.Context, r *limiter.StoreRequest, out []gcra.Result) (gcra.Result, error) {
	if r.Strict && c.strict != nil {
		return c.decideStrict(ctx, r, out)
	}
	var (
		agg gcra.Result
		err error
	)
	for range 2 {
		if err = c.checkThawed(); err != nil { // a thaw also moves the epoch
			return gcra.Result{}, err
		}
		if agg, err = c.decideOwned(ctx, c.deps.Mem.Epoch(), r, out, true); !errors.Is(err, memstore.ErrStaleEpoch) {
			break
		}
	}
	return agg, c.staleAsMoving(r.Group, err)
}

// decideHeld decides a fast r from the TATs in memory (all of r's keys were
// held, or known missing without Redis, when the memory was at epoch) and
// marks what it admitted for write-behind. epoch must be read before the
// caller looked for the keys: a drop since then moves the epoch, and an
// absent key is then refused instead of being read as rested. It does not
// start over when a drop refuses it: it would have to load, and its callers
// chose it because nothing needs loading.
func (c *Cluster) decideHeld(ctx context.Context, epoch uint64, r *limiter.StoreRequest, out []gcra.Result) (gcra.Result, error) {
	agg, err := c.decideOwned(ctx, epoch, r, out, false)
	return agg, c.staleAsMoving(r.Group, err)
}

// decideOwned checks that this node owns r.Group at the memory's epoch
// (read by the caller before anything it decided on), loads r's missing
// keys if load is set, and decides r from memory at that epoch, marking
// what it admitted for write-behind.
func (c *Cluster) decideOwned(ctx context.Context, epoch uint64, r *limiter.StoreRequest, out []gcra.Result, load bool) (gcra.Result, error) {
	if owner := c.owner(r.Group); owner != c.cfg.LocalName {
		return gcra.Result{}, movingError(r.Group, owner)
	}
	if load {
		if err := c.ensureLoaded(ctx, r, epoch); err != nil {
			return gcra.Result{}, err
		}
	}
	limits, ok, release := c.regionLimits(epoch, r)
	defer release()
	if !ok {
		return c.shareDenied(r, out), nil
	}
	agg, err := c.deps.Mem.DecideAdjusted(ctx, epoch, r.Group, r.Keys, limits, r.Cost, r.Now, out, c.leaseAdjust(r.Group, r.Now))
	if errors.Is(err, memstore.ErrFull) {
		return agg, &limiter.UnavailableError{Reason: ReasonMemoryFull, Err: err}
	}
	if err != nil || !agg.Allowed || c.deps.WriteBehind == nil {
		return agg, err
	}
	for i, k := range r.Keys {
		if c.mustPersist(out[i].TAT, r.Now, limits[i].Interval) {
			c.deps.WriteBehind.Mark(k, out[i].TAT)
		}
	}
	return agg, nil
}

// staleAsMoving turns a decision refused for a stale epoch into the
// retryable ownership_changing fallback: r's keys were dropped while it
// ran, so ownership is moving (or state is being reloaded).
func (c *Cluster) staleAsMoving(group string, err error) error {
	if !errors.Is(err, memstore.ErrStaleEpoch) {
		return err
	}
	return movingError(group, c.owner(group))
}

func movingError(group, owner string) error {
	return &limiter.UnavailableError{Reason: "ownership_changing", Err: fmt.Errorf("cluster: group %q is moving to %s", group, owner)}
}

// ensureLoaded loads from Redis the TATs of r's keys that this owner does
// not hold yet, so that no key starts from a full burst while Redis
// remembers it. Concurrent first touches may both load; Put keeps the later
// TAT, so that costs a read, never correctness. It returns
// memstore.ErrStaleEpoch when keys were dropped since epoch: the load may
// predate the hand-off, and this node may no longer own the keys.
func (c *Cluster) ensureLoaded(ctx context.Context, r *limiter.StoreRequest, epoch uint64) error {
	if c.deps.Redis == nil {
		return nil
	}
	var missing []string
	for _, k := range r.Keys {
		if !c.known(epoch, r.Group, k) {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if !c.deps.Mem.Room(r.Group, len(missing), r.Now) {
		return &limiter.UnavailableError{Reason: ReasonMemoryFull, Err: memstore.ErrFull}
	}
	done, err := c.guard(redisBreaker)
	if err != nil {
		return &limiter.UnavailableError{Reason: "state_load_failed", Err: err}
	}
	lctx, cancel := context.WithTimeout(ctx, c.cfg.LoadTimeout)
	defer cancel()
	tats, err := c.loadTATs(lctx, missing)
	done(blame(ctx, err))
	c.metrics.loads.Inc()
	c.metrics.redisCommands.WithLabelValues("load_tats").Inc()
	if err != nil {
		c.metrics.loadErrors.Inc()
		if ctx.Err() != nil {
			return err
		}
		return &limiter.UnavailableError{Reason: "state_load_failed", Err: err}
	}
	for i, k := range missing {
		if !c.deps.Mem.PutAt(epoch, r.Group, k, tats[i]) {
			return memstore.ErrStaleEpoch
		}
	}
	return nil
}

// decideStrict decides r through the Redis script, batched with other
// strict requests in flight. Redis's own clock decides (now = 0).
func (c *Cluster) decideStrict(ctx context.Context, r *limiter.StoreRequest, out []gcra.Result) (gcra.Result, error) {
	limits, ok := c.strictRegionLimits(r) // a copy
	if !ok {
		return c.shareDenied(r, out), nil
	}
	done, err := c.guard(redisBreaker)
	if err != nil {
		return gcra.Result{}, &limiter.UnavailableError{Reason: "redis_unavailable", Err: err}
	}
	c.metrics.redisCommands.WithLabelValues("decide_strict").Inc()
	// Copies: the queue may send the request after ctx ends and this
	// returns, and the limiter reuses r (limiter.Store).
	d, err := c.strict.do(ctx, redisbackend.DecideRequest{Keys: slices.Clone(r.Keys), Limits: limits, Cost: r.Cost})
	done(blame(ctx, err)) // a full queue counts too: Redis is not keeping up
	if err != nil {
		if ctx.Err() != nil {
			return gcra.Result{}, err
		}
		if errors.Is(err, errStrictQueueFull) {
			return gcra.Result{}, &limiter.UnavailableError{Reason: ReasonStrictQueueFull, Err: err}
		}
		return gcra.Result{}, &limiter.UnavailableError{Reason: "redis_unavailable", Err: err}
	}
	if len(d.Results) != len(out) {
		return gcra.Result{}, fmt.Errorf("cluster: redis answered %d results for %d limits", len(d.Results), len(out))
	}
	copy(out, d.Results)
	return d.Overall, nil
}
