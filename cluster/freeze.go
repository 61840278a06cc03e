package cluster

import (
	"context"
	"time"
)

// A process that was frozen — SIGSTOP, a paused VM, a stall of the whole
// runtime — does not notice that time passed. If the freeze outlasted the
// failure detector, its peers declared it dead and decided its groups from
// Redis meanwhile; when it wakes, neither it nor gossip sees any membership
// change (it simply refutes the rumour of its death), so it would go on
// deciding from TATs that are as old as the freeze, granting bursts the
// keys already spent elsewhere.
//
// So the cluster keeps a heartbeat. When the heartbeat (or a decision) finds
// that more than FreezeLimit passed since the last beat, the node thaws
// before its next fast decision: it flushes its buffered TATs (Redis keeps
// the later of its and its successors', see redisbackend.StoreTATs) and
// forgets every key, so each is loaded from Redis again on its next use.

// beatEvery is how often the heartbeat ticks; it bounds how stale the
// last beat can be in normal operation.
const beatEvery = 100 * time.Millisecond

// sinceBeat is how long ago the last heartbeat was, on the monotonic
// clock.
func (c *Cluster) sinceBeat() time.Duration {
	return time.Duration(time.Since(c.born) - time.Duration(c.lastBeat.Load()))
}

func (c *Cluster) beat() { c.lastBeat.Store(int64(time.Since(c.born))) }

// frozen reports whether the process slept past FreezeLimit since the
// last heartbeat. Without Redis there is nothing to reload from; without a
// heartbeat there is nothing to measure.
func (c *Cluster) frozen() bool {
	return c.deps.Redis != nil && c.beating.Load() && c.sinceBeat() > c.cfg.FreezeLimit
}

// RunHeartbeat beats until ctx ends, thawing after a freeze. Run it for the
// life of the node.
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
			c.thawIfFrozen(ctx)
		}
	}
}

// thawIfFrozen thaws once per freeze, however many callers find it; then
// it beats.
func (c *Cluster) thawIfFrozen(ctx context.Context) {
	if !c.frozen() {
		c.beat()
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	gap := c.sinceBeat()
	if gap <= c.cfg.FreezeLimit { // another caller thawed first
		return
	}
	c.metrics.freezes.Inc()
	c.logger.Warn("this node was frozen; reloading its state from Redis before deciding", "frozen_for", gap.Round(time.Millisecond))
	c.dropLocked(context.WithoutCancel(ctx), func(string) bool { return true })
	c.beat()
}
