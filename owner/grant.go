package owner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/breaker"
	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/lease"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/peer"
	"github.com/weirhq/weir/redisbackend"
)

// Leases, owner side: a node grants batches of a hot leasable key's units
// to peers (HandleLease) and decides every request on such a key on the
// ledger's Effective TAT, so units out on leases are never refilled. The
// holder side (spending, refreshing) is package leaselink.
// lease/design.md has the accounting and the protocol;
// docs/architecture.md ("Leases") the costs.

// GrantConfig tunes the owner's side of leases.
type GrantConfig struct {
	// Grantor tunes the ledger (package lease); its Name distinguishes this
	// process's grants (the node's name plus an incarnation).
	Grantor lease.GrantorConfig
	// WriteTimeout bounds the write-through of grant TATs to Redis before
	// the owner answers.
	WriteTimeout time.Duration
	// TimeBase is the TATs' time base grants are stamped on (the Redis
	// clock); nil means the Owner's Clock.
	TimeBase clock.Clock
}

// grants is the owner's lease ledger. Lock order: a memstore shard lock,
// then mu.
type grants struct {
	cfg GrantConfig
	// mu guards g: decisions read their keys' Effective TATs under its
	// read lock, concurrently; everything that changes g takes it whole.
	mu     sync.RWMutex
	g      *lease.Grantor
	active atomic.Int64 // g.Keys(), read without mu by decisions
	counts *prometheus.CounterVec
}

// EnableLeases turns granting on. Call it once, after New and before the
// first decision; without it the owner grants no leases and answers every
// refresh with an error.
func (o *Owner) EnableLeases(cfg GrantConfig, reg prometheus.Registerer) error {
	if cfg.WriteTimeout <= 0 {
		return errors.New("owner: leases: write timeout must be positive")
	}
	if cfg.TimeBase == nil {
		cfg.TimeBase = o.clk
	}
	g, err := lease.NewGrantor(cfg.Grantor)
	if err != nil {
		return err
	}
	gs := &grants{cfg: cfg, g: g, counts: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_lease_grants_total",
		Help: "Lease requests an owner answered, by limit and outcome (granted, denied, capped, busy, settled, not_owner, error).",
	}, []string{"limit", "outcome"})}
	if reg != nil {
		if err := reg.Register(gs.counts); err != nil {
			return err
		}
	}
	o.grants = gs
	return nil
}

// GrantStats returns the ledger's counts per policy limit (nil without
// EnableLeases), for the lease metrics (leaselink). Safe for concurrent use.
func (o *Owner) GrantStats() map[string]lease.GrantorStats {
	gs := o.grants
	if gs == nil {
		return nil
	}
	gs.mu.RLock()
	defer gs.mu.RUnlock()
	return gs.g.Stats()
}

func (gs *grants) now() int64 { return gs.cfg.TimeBase.Now().UnixNano() }

// leaseAdjust returns the memstore hook that decides group's keys on the
// ledger's Effective TAT at now, or nil when no key has a ledger.
func (o *Owner) leaseAdjust(group string, now int64) memstore.Adjust {
	gs := o.grants
	if gs == nil || gs.active.Load() == 0 {
		return nil
	}
	return func(key string, tat int64) int64 {
		gs.mu.RLock()
		defer gs.mu.RUnlock()
		return gs.g.Effective(group, key, tat, now)
	}
}

var _ peer.LeaseHandler = (*Owner)(nil)

// HandleLease answers a peer's lease refresh as the owner: per item, it
// settles the returned lease and grants, caps or denies a new one against
// the key's TAT under the key's lock, then writes the TATs of the grants
// through to Redis before answering. Items of groups this node does not
// own answer NotOwner; a grant whose write-through failed answers an error
// (its units stay charged and strand: under-admission, never excess). Put
// an intake.Validator in front of it: the items' terms and numbers must be the
// owner's policy's.
func (o *Owner) HandleLease(ctx context.Context, from string, r lease.Refresh) []peer.LeaseAnswer {
	out := make([]peer.LeaseAnswer, len(r.Items))
	gs := o.grants
	if gs == nil {
		for i := range out {
			out[i].Err = errors.New("owner: this node grants no leases")
		}
		return out
	}
	now := gs.now()
	var writes []redisbackend.TAT
	var granted []int
	for i, it := range r.Items {
		persist, err := o.grant(ctx, gs, it, now, &out[i])
		if err != nil {
			out[i] = peer.LeaseAnswer{Err: err}
			continue
		}
		if out[i].Outcome == lease.Granted && o.deps.Redis != nil {
			writes = append(writes, redisbackend.TAT{Key: it.Key, TAT: persist, Now: now})
			granted = append(granted, i)
		}
	}
	if err := o.writeThrough(ctx, gs, writes); err != nil {
		for _, i := range granted {
			o.revoke(gs, r.Items[i], out[i].Answer, now)
			out[i] = peer.LeaseAnswer{Err: fmt.Errorf("owner: lease not stored, not granted: %w", err)}
		}
	}
	for i := range out {
		gs.count(r.Items[i].Label, out[i])
	}
	return out
}

// count counts one answered lease request of limit.
func (gs *grants) count(limit string, a peer.LeaseAnswer) {
	outcome := a.Outcome.String()
	switch {
	case a.NotOwner != "":
		outcome = "not_owner"
	case a.Err != nil:
		outcome = "error"
	}
	gs.counts.WithLabelValues(limit, outcome).Inc()
}

// grant decides one item into ans and returns the TAT to persist for it:
// the grant's TAT raised by the key's reservation folded at its latest
// expiry, so that an owner that loads it after a crash or hand-off never
// refills units that peers may still spend (see lease/design.md §5).
func (o *Owner) grant(ctx context.Context, gs *grants, it lease.Request, now int64, ans *peer.LeaseAnswer) (int64, error) {
	epoch := o.deps.Mem.Epoch() // before the ownership check: see checkOwned
	if owner := o.deps.Ring.Owner(it.Group); owner != o.cfg.LocalName {
		ans.NotOwner = owner
		return 0, nil
	}
	if err := o.checkThawed(); err != nil {
		return 0, err
	}
	if err := o.ensureLoaded(ctx, it.Group, []string{it.Key}, now, epoch); err != nil {
		return 0, staleAsMoving(it.Group, err)
	}
	var persist int64
	err := o.deps.Mem.UpdateAt(epoch, it.Group, it.Key, now, func(tat int64, _ bool) (int64, error) {
		gs.mu.Lock()
		defer gs.mu.Unlock()
		a, err := gs.g.Grant(tat, now, it)
		if err != nil {
			return 0, err
		}
		res := gs.g.Reservation(it.Group, it.Key, now)
		persist = max(a.TAT, res.Until+res.Units*it.Limit.Interval)
		gs.active.Store(int64(gs.g.Keys()))
		ans.Answer = a
		return a.TAT, nil
	})
	return persist, staleAsMoving(it.Group, err)
}

// revoke settles a grant whose write-through failed as returned unspent:
// the peer is answered an error, so nobody can spend its units, and they
// go back to the key at once instead of stranding until the lease expires
// (and keeping the peer busy until then). What the failed write may have
// stored in Redis is only higher, never lower. A key dropped meanwhile
// keeps its ledger's floor until the lease expires.
func (o *Owner) revoke(gs *grants, it lease.Request, a lease.Answer, now int64) {
	it.Demand, it.Return = 0, lease.Return{Grantor: a.Grantor, Lease: a.Lease, Unspent: a.Units}
	_ = o.deps.Mem.UpdateAt(o.deps.Mem.Epoch(), it.Group, it.Key, now, func(tat int64, held bool) (int64, error) {
		if !held {
			return 0, memstore.ErrStaleEpoch // dropped: do not re-create it
		}
		gs.mu.Lock()
		defer gs.mu.Unlock()
		ans, err := gs.g.Grant(tat, now, it)
		gs.active.Store(int64(gs.g.Keys()))
		return ans.TAT, err
	})
}

// writeThrough stores grant TATs in Redis within WriteTimeout. No Redis,
// nothing to write. An open Redis breaker fails it at once, but its own
// failures are excused: a grant that is not stored costs only forwards,
// and a write slowed past its tight timeout on a loaded machine must not
// open the breaker that guards every load and strict decision.
func (o *Owner) writeThrough(ctx context.Context, gs *grants, tats []redisbackend.TAT) error {
	if len(tats) == 0 {
		return nil
	}
	done, err := o.guard(redisBreaker)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, gs.cfg.WriteTimeout)
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

// SweepGrants folds every expired lease into its key's TAT, one key at a
// time under that key's lock, so no decision sees a key between the two.
// The lease refresh loop (leaselink) calls it every sweep; without
// EnableLeases it does nothing. Safe for concurrent use.
func (o *Owner) SweepGrants() {
	gs := o.grants
	if gs == nil {
		return
	}
	now := gs.now()
	gs.mu.RLock()
	due := gs.g.Due(now)
	gs.mu.RUnlock()
	for _, d := range due {
		epoch := o.deps.Mem.Epoch() // before the ownership check: see checkOwned
		if !o.owns(d.Group) {
			continue // handed off: dropGrants forgets the ledger
		}
		// A refusal (dropped meanwhile, or memory full) leaves the lease in
		// the ledger, where Effective keeps its floor until a later sweep.
		_ = o.deps.Mem.UpdateAt(epoch, d.Group, d.Key, now, func(tat int64, _ bool) (int64, error) {
			gs.mu.Lock()
			defer gs.mu.Unlock()
			return gs.g.Expire(d.Group, d.Key, tat, now), nil
		})
	}
	gs.mu.Lock()
	gs.active.Store(int64(gs.g.Keys()))
	gs.mu.Unlock()
}

// dropGrants forgets the ledgers of keys handed off. Their reservations
// are already in Redis: every grant wrote its folded TAT through.
func (o *Owner) dropGrants(lost func(key string) bool) {
	gs := o.grants
	if gs == nil {
		return
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	gs.g.Drop(func(_, key string) bool { return lost(key) })
	gs.active.Store(int64(gs.g.Keys()))
}

// Leased returns the units of key of group out on leases now, by the
// owner's ledger (0 without EnableLeases): for inspection. Safe for
// concurrent use.
func (o *Owner) Leased(group, key string) int64 {
	gs := o.grants
	if gs == nil {
		return 0
	}
	gs.mu.RLock()
	defer gs.mu.RUnlock()
	return gs.g.Outstanding(group, key, gs.now())
}
