package forward

import (
	"context"
	"maps"
	"slices"

	"github.com/weirhq/weir/limitkey"
	"github.com/weirhq/weir/owner"
)

// SetMembers installs a new membership (name -> peer gRPC address), rebuilds
// the ring and has the owner hand off the groups this node no longer owns:
// their pending TATs are flushed to Redis and their keys dropped from
// memory, so a later return of ownership reloads them. Members that
// disappear are taken to have left on purpose; use SetMembersFailed when
// the caller knows which failed. Members that reappear stop counting as
// failed.
func (f *Router) SetMembers(ctx context.Context, members map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setMembersLocked(ctx, members, slices.Collect(maps.Keys(f.failed)))
}

// SetMembersFailed is SetMembers for a caller that also knows which members
// failed — were declared dead, as on the far side of a split — rather than
// left gracefully (membership.Membership.Failed). Only failures count
// towards noticing that this node was cut off from most of the cluster
// (see rejoinedLocked), so a planned scale-down does not make the next join
// reload every key.
func (f *Router) SetMembersFailed(ctx context.Context, members map[string]string, failed []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setMembersLocked(ctx, members, failed)
}

func (f *Router) setMembersLocked(ctx context.Context, members map[string]string, failed []string) {
	f.failed = make(map[string]bool, len(failed))
	for _, name := range failed {
		if _, alive := members[name]; !alive {
			f.failed[name] = true
		}
	}
	old := f.routes.addrsNow()
	rejoined := f.rejoinedLocked(len(old), len(members))
	if maps.Equal(old, members) {
		return
	}
	names := make([]string, 0, len(members))
	for name := range members {
		names = append(names, name)
	}
	f.routes.setAddrs(members)
	f.rtt.retain(members)
	f.deps.Owner.OwnershipChanging() // before decisions can see the new ring
	if err := f.routes.ring.Set(names); err != nil {
		f.logger.Error("ring rebuild failed; keeping the previous ring", "err", err)
		return
	}
	f.metrics.ringChanges.Inc()
	f.logger.Info("ring changed", "members", len(names))
	if rejoined {
		// This node was on the small side of a split: the other side may
		// have decided the groups it kept, from Redis. Reload them all.
		f.metrics.rejoins.Inc()
		f.logger.Warn("rejoined after being cut off from most of the cluster; reloading state from Redis", "members", len(members))
		f.deps.Owner.Drop(ctx, func(string) bool { return true })
		return
	}
	f.deps.Owner.Drop(ctx, func(key string) bool {
		group, _ := limitkey.Group(key) // unescaped: the value decisions route by
		return f.routes.Owner(group) != f.local
	})
}

// rejoinedLocked tracks whether this node is cut off from most of the
// cluster — the members it sees are no more than those that failed — and
// reports true when the ring grows again after that. While cut off, the
// majority side declares this node dead and decides its groups from Redis,
// so what this node kept in memory may be behind. Members that left on
// purpose do not count: they handed their groups off, and nobody decided
// this node's groups behind its back.
func (f *Router) rejoinedLocked(before, after int) bool {
	rejoined := f.cutOff && after > before
	f.cutOff = len(f.failed) > 0 && after <= len(f.failed)
	return rejoined
}

// Handoff has the owner flush every pending TAT and drop all owned state:
// the node is leaving, and whoever takes its groups will load them from
// Redis.
func (f *Router) Handoff(ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deps.Owner.Drop(ctx, func(string) bool { return true })
}

// RunHeartbeat drives the owner's heartbeat (owner.Owner.Beat) every
// owner.BeatEvery, and at once when a decision found this node frozen,
// until ctx ends: the owner finds freezes and reloads state after one,
// off the request path. Run it for the life of the node, in one goroutine.
func (f *Router) RunHeartbeat(ctx context.Context) error {
	o := f.deps.Owner
	o.StartHeartbeat()
	defer o.StopHeartbeat()
	t := f.clk.NewTicker(owner.BeatEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		case <-o.ThawRequests():
		}
		o.Beat(ctx)
	}
}
