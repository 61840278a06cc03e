package owner

import (
	"context"
	"fmt"
	"time"

	"github.com/weirhq/weir/breaker"
	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/redisbackend"
)

// Leases, owner side: the lease ledger of the grants this node made
// (leaselink.Grants) changes keys only through UpdateOwned and UpdateHeld,
// under the keys' locks at the memory's epoch, and writes its grants
// through WriteThrough; decisions on its keys read the ledger's Effective
// TAT (Leases.Effective). lease/design.md has the accounting.

// Leases is the ledger of the leases this node granted as an owner
// (*leaselink.Grants).
type Leases interface {
	// Active reports whether any key has a ledger: without one, decisions
	// read their TATs as they are. Cheap: every decision asks.
	Active() bool
	// Effective is key's TAT as decisions must see it at now: tat raised
	// by the units out on leases (lease.Grantor.Effective).
	Effective(group, key string, tat, now int64) int64
	// Forget forgets the ledgers of keys handed off.
	Forget(lost func(key string) bool)
}

// EnableLeases has decisions read l's Effective TATs and drops forget l's
// ledgers of the keys dropped. Call it once, after New and before the
// first decision.
func (o *Owner) EnableLeases(l Leases) { o.leases = l }

func (o *Owner) forgetLeases(lost func(key string) bool) {
	if o.leases != nil {
		o.leases.Forget(lost)
	}
}

// UpdateOwned applies f to key of group under the key's lock at now, as
// the group's owner: it reads the memory's epoch, then checks ownership
// (notOwner names the owner when this node is not, and nothing changes),
// and with load set refuses while a thaw is pending and loads the key from
// Redis first if this owner does not hold it. A drop since the epoch was
// read refuses the change (the retryable ownership_changing error). Safe
// for concurrent use.
func (o *Owner) UpdateOwned(ctx context.Context, group, key string, now int64, load bool,
	f func(tat int64, held bool) (int64, error)) (notOwner string, err error) {
	epoch := o.deps.Mem.Epoch() // before the ownership check: see checkOwned
	if owner := o.deps.Ring.Owner(group); owner != o.cfg.LocalName {
		return owner, nil
	}
	if load {
		if err := o.checkThawed(); err != nil {
			return "", err
		}
		// No limit: the key's span is unknown, so it loads unless swept.
		if err := o.ensureLoaded(ctx, epoch, &decide.Request{Group: group, Keys: []string{key}, Now: now}); err != nil {
			return "", staleAsMoving(group, err)
		}
	}
	return "", staleAsMoving(group, o.deps.Mem.UpdateAt(epoch, group, key, now, f))
}

// UpdateHeld applies f to key of group under the key's lock at the
// memory's current epoch, without an ownership check or a load: f learns
// whether the key is held and refuses to re-create a dropped one. Safe
// for concurrent use.
func (o *Owner) UpdateHeld(group, key string, now int64, f func(tat int64, held bool) (int64, error)) error {
	return o.deps.Mem.UpdateAt(o.deps.Mem.Epoch(), group, key, now, f)
}

// HasRedis reports whether this owner persists to Redis.
func (o *Owner) HasRedis() bool { return o.deps.Redis != nil }

// WriteThrough stores tats in Redis within timeout. No Redis, nothing to
// write. An open Redis breaker fails it at once, but its own failures are
// excused: a lease grant that is not stored costs only forwards, and a
// write slowed past its tight timeout on a loaded machine must not open the
// breaker that guards every load and strict decision. Safe for concurrent
// use.
func (o *Owner) WriteThrough(ctx context.Context, tats []redisbackend.TAT, timeout time.Duration) error {
	if len(tats) == 0 || o.deps.Redis == nil {
		return nil
	}
	done, err := o.guard(redisBreaker)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err = o.deps.Redis.StoreTATs(wctx, tats)
	if err != nil {
		done(fmt.Errorf("lease write-through: %w: %w", breaker.ErrExcused, err))
	} else {
		done(nil)
	}
	o.metrics.redisCommands.WithLabelValues("lease_store").Add(float64(len(tats)))
	return err
}
