package cluster

import (
	"context"
	"errors"
	"time"

	"github.com/weirhq/weir/limiter"
)

// A process that was frozen — SIGSTOP, a paused VM, a stall of the whole
// runtime — does not notice that time passed. If the freeze outlasted the
// failure detector, its peers declared it dead and decided its groups from
// Redis meanwhile; when it wakes, neither it nor gossip sees any membership
// change (it simply refutes the rumour of its death), so it would go on
// deciding from TATs that are as old as the freeze, granting bursts the
// keys already spent elsewhere.
//
// So the cluster keeps a heartbeat. When the heartbeat or a decision finds
// that more than FreezeLimit passed since the last beat, the node thaws: it
// flushes its buffered TATs (Redis keeps the later of its and its
// successors', see redisbackend.StoreTATs) and forgets every key, so each
// is loaded from Redis again on its next use. The flush can take up to
// HandoffTimeout, so it never runs on the request path: the heartbeat
// goroutine does it, and until it is done fast decisions fail at once with
// the retryable reason "thawing" (the limiter applies the failure policy),
// so no caller waits on it. Strict decisions are unaffected.

// beatEvery is how often the heartbeat ticks; it bounds how stale the
// last beat can be in normal operation.
const beatEvery = 100 * time.Millisecond

// errThawing is the fallback while a thaw is pending or running.
var errThawing = &limiter.UnavailableError{Reason: "thawing", Err: errors.New("cluster: reloading state after a freeze")}

// sinceBeat is how long ago the last heartbeat was, on the injected clock.
func (c *Cluster) sinceBeat() time.Duration {
	return c.now().Sub(c.born) - time.Duration(c.lastBeat.Load())
}

func (c *Cluster) beat() { c.lastBeat.Store(int64(c.now().Sub(c.born))) }

// frozen reports whether the process slept past FreezeLimit since the
// last heartbeat. Without Redis there is nothing to reload from; without a
// heartbeat there is nothing to measure.
func (c *Cluster) frozen() bool {
	return c.deps.Redis != nil && c.beating.Load() && c.sinceBeat() > c.cfg.FreezeLimit
}

// thawPending reports whether memory must not be trusted: the node was
// found frozen and has not finished reloading.
func (c *Cluster) thawPending() bool { return c.thawing.Load() || c.frozen() }

// checkThawed is the request path's check: nil when memory can be trusted,
// errThawing otherwise. A decision that finds the node frozen asks the
// heartbeat to thaw and returns without waiting for it.
func (c *Cluster) checkThawed() error {
	if !c.thawPending() {
		return nil
	}
	c.noteFrozen()
	select {
	case c.thawNow <- struct{}{}:
	default: // already asked
	}
	return errThawing
}

// noteFrozen marks a freeze found, once per freeze.
func (c *Cluster) noteFrozen() {
	gap := c.sinceBeat()
	if gap <= c.cfg.FreezeLimit || !c.thawing.CompareAndSwap(false, true) {
		return
	}
	c.metrics.freezes.Inc()
	c.logger.Warn("this node was frozen; reloading its state from Redis in the background", "frozen_for", gap.Round(time.Millisecond))
}

// RunHeartbeat beats until ctx ends, and thaws after a freeze (see above).
// Run it for the life of the node, in one goroutine.
func (c *Cluster) RunHeartbeat(ctx context.Context) error {
	c.beat()
	c.beating.Store(true)
	defer c.beating.Store(false)
	t := time.NewTicker(beatEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-c.thawNow:
		}
		if c.frozen() {
			c.noteFrozen()
		}
		if c.thawing.Load() {
			c.thaw(ctx)
		}
		c.beat()
	}
}

// thaw flushes and forgets every key, then beats, then lets fast decisions
// through again (in that order, so no decision sees the old beat).
func (c *Cluster) thaw(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	start := c.now()
	c.dropLocked(ctx, func(string) bool { return true })
	c.beat()
	c.thawing.Store(false)
	c.logger.Info("thawed: state will be reloaded from Redis", "took", c.now().Sub(start))
}
