package cluster

import (
	"context"
	"errors"
	"fmt"

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
func (c *Cluster) decideLocal(ctx context.Context, r *limiter.StoreRequest, out []gcra.Result) (gcra.Result, error) {
	if r.Strict && c.strict != nil {
		return c.decideStrict(ctx, r, out)
	}
	if c.frozen() {
		c.thawIfFrozen(ctx)
	}
	if err := c.ensureLoaded(ctx, r); err != nil {
		return gcra.Result{}, err
	}
	return c.decideHeld(ctx, r, out)
}

// decideHeld decides a fast r from the TATs in memory (all of r's keys are
// held, or known missing without Redis) and marks what it admitted for
// write-behind.
func (c *Cluster) decideHeld(ctx context.Context, r *limiter.StoreRequest, out []gcra.Result) (gcra.Result, error) {
	agg, err := c.deps.Mem.Decide(ctx, r.Group, r.Keys, r.Limits, r.Cost, r.Now, out)
	if errors.Is(err, memstore.ErrFull) {
		return agg, &limiter.UnavailableError{Reason: ReasonMemoryFull, Err: err}
	}
	if err != nil || !agg.Allowed || c.deps.WriteBehind == nil {
		return agg, err
	}
	for i, k := range r.Keys {
		c.deps.WriteBehind.Mark(k, out[i].TAT)
	}
	return agg, nil
}

// ensureLoaded loads from Redis the TATs of r's keys that this owner does
// not hold yet, so that no key starts from a full burst while Redis
// remembers it. Concurrent first touches may both load; Put keeps the later
// TAT, so that costs a read, never correctness.
func (c *Cluster) ensureLoaded(ctx context.Context, r *limiter.StoreRequest) error {
	if c.deps.Redis == nil {
		return nil
	}
	var missing []string
	for _, k := range r.Keys {
		if !c.deps.Mem.Has(r.Group, k) {
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
	tats, err := c.deps.Redis.LoadTATs(lctx, missing)
	done(blame(ctx, err))
	c.metrics.loads.Inc()
	c.metrics.redisCommands.WithLabelValues("load_tats").Add(float64(len(missing)))
	if err != nil {
		c.metrics.loadErrors.Inc()
		if ctx.Err() != nil {
			return err
		}
		return &limiter.UnavailableError{Reason: "state_load_failed", Err: err}
	}
	for i, k := range missing {
		c.deps.Mem.Put(r.Group, k, tats[i])
	}
	return nil
}

// decideStrict decides r through the Redis script, batched with other
// strict requests in flight. Redis's own clock decides (now = 0).
func (c *Cluster) decideStrict(ctx context.Context, r *limiter.StoreRequest, out []gcra.Result) (gcra.Result, error) {
	done, err := c.guard(redisBreaker)
	if err != nil {
		return gcra.Result{}, &limiter.UnavailableError{Reason: "redis_unavailable", Err: err}
	}
	c.metrics.redisCommands.WithLabelValues("decide_strict").Inc()
	d, err := c.strict.do(ctx, redisbackend.DecideRequest{Keys: r.Keys, Limits: r.Limits, Cost: r.Cost})
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
