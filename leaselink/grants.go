package leaselink

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/lease"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/owner"
	"github.com/weirhq/weir/peer"
	"github.com/weirhq/weir/redisbackend"
)

// The grantor side of leases: an owner grants batches of a hot leasable
// key's units to peers (HandleLease), and the owner decides every request
// on such a key on the ledger's Effective TAT (Effective), so units out on
// leases are never refilled. Grants keeps the ledger and runs the
// protocol; every change of a key's TAT goes through the owner's state
// machine (Owner), under the key's lock at the owner's memory epoch.
// lease/design.md has the accounting; docs/architecture.md ("Leases") the
// costs.

// GrantConfig tunes the owner's side of leases.
type GrantConfig struct {
	// Grantor tunes the ledger (package lease); its Name distinguishes this
	// process's grants (the node's name plus an incarnation).
	Grantor lease.GrantorConfig
	// WriteTimeout bounds the write-through of grant TATs to Redis before
	// the owner answers.
	WriteTimeout time.Duration
}

// DefaultGrantConfig returns package lease's grantor defaults (Name unset:
// the caller names the process) and a 50ms write-through timeout.
func DefaultGrantConfig() GrantConfig {
	return GrantConfig{Grantor: lease.DefaultGrantorConfig(), WriteTimeout: 50 * time.Millisecond}
}

// Validate reports whether c is usable. It changes nothing.
func (c GrantConfig) Validate() error {
	if c.WriteTimeout <= 0 {
		return errors.New("leaselink: grants: write timeout must be positive")
	}
	if err := c.Grantor.Validate(); err != nil {
		return fmt.Errorf("leaselink: grants: %w", err)
	}
	return nil
}

// Owner is the owner's state machine as grants use it (*owner.Owner).
type Owner interface {
	// UpdateOwned applies f to key under its lock as group's owner (see
	// owner.Owner.UpdateOwned); notOwner names the owner when this node
	// is not.
	UpdateOwned(ctx context.Context, group, key string, now int64, load bool, f func(tat int64, held bool) (int64, error)) (notOwner string, err error)
	// UpdateHeld applies f to a key held now, without an ownership check.
	UpdateHeld(group, key string, now int64, f func(tat int64, held bool) (int64, error)) error
	// WriteThrough stores TATs in Redis within timeout (nothing without
	// Redis).
	WriteThrough(ctx context.Context, tats []redisbackend.TAT, timeout time.Duration) error
	// HasRedis reports whether grants are persisted.
	HasRedis() bool
}

var (
	_ Owner             = (*owner.Owner)(nil)
	_ owner.Leases      = (*Grants)(nil)
	_ peer.LeaseHandler = (*Grants)(nil)
	_ Grantor           = (*Grants)(nil)
)

// Grants is a node's lease ledger as an owner, and its answers to lease
// refreshes. Safe for concurrent use. Lock order: a memstore shard lock
// (the owner's, inside UpdateOwned), then mu.
type Grants struct {
	cfg   GrantConfig
	owner Owner
	clk   clock.Clock // the TATs' time base
	// mu guards g: decisions read their keys' Effective TATs under its
	// read lock, concurrently; everything that changes g takes it whole.
	mu     sync.RWMutex
	g      *lease.Grantor
	active atomic.Int64 // g.Keys(), read without mu by decisions
	counts *prometheus.CounterVec
}

// NewGrants returns the grantor side over o, stamping grants on clk (the
// TATs' time base; nil: clock.Real()). Hand it to o.EnableLeases before
// the first decision.
func NewGrants(cfg GrantConfig, o Owner, clk clock.Clock, reg prometheus.Registerer) (*Grants, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if o == nil {
		return nil, errors.New("leaselink: grants need an owner")
	}
	if clk == nil {
		clk = clock.Real()
	}
	g, err := lease.NewGrantor(cfg.Grantor)
	if err != nil {
		return nil, err
	}
	gs := &Grants{cfg: cfg, owner: o, clk: clk, g: g, counts: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_lease_grants_total",
		Help: "Lease requests an owner answered, by limit and outcome (granted, denied, capped, busy, settled, not_owner, error).",
	}, []string{"limit", "outcome"})}
	if reg != nil {
		if err := reg.Register(gs.counts); err != nil {
			return nil, err
		}
	}
	return gs, nil
}

func (gs *Grants) now() int64 { return gs.clk.Now().UnixNano() }

// GrantStats returns the ledger's counts per policy limit, for the lease
// metrics. Safe for concurrent use.
func (gs *Grants) GrantStats() map[string]lease.GrantorStats {
	gs.mu.RLock()
	defer gs.mu.RUnlock()
	return gs.g.Stats()
}

// Leased returns the units of key of group out on leases now: for
// inspection. Safe for concurrent use.
func (gs *Grants) Leased(group, key string) int64 {
	gs.mu.RLock()
	defer gs.mu.RUnlock()
	return gs.g.Outstanding(group, key, gs.now())
}

// Active reports whether any key has a ledger, without a lock. It is
// owner.Leases.
func (gs *Grants) Active() bool { return gs.active.Load() != 0 }

// Effective is key's TAT as decisions must see it at now, under the
// ledger's read lock (decisions read side by side). It is owner.Leases.
func (gs *Grants) Effective(group, key string, tat, now int64) int64 {
	gs.mu.RLock()
	defer gs.mu.RUnlock()
	return gs.g.Effective(group, key, tat, now)
}

// Forget forgets the ledgers of keys handed off. Their reservations are
// already in Redis: every grant wrote its folded TAT through. It is
// owner.Leases.
func (gs *Grants) Forget(lost func(key string) bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	gs.g.Drop(func(_, key string) bool { return lost(key) })
	gs.active.Store(int64(gs.g.Keys()))
}

// HandleLease answers a peer's lease refresh as the owner: per item, it
// settles the returned lease and grants, caps or denies a new one against
// the key's TAT under the key's lock, then writes the TATs of the grants
// through to Redis before answering. Items of groups this node does not
// own answer NotOwner; a grant whose write-through failed answers an error
// (its units stay charged and strand: under-admission, never excess). Put
// an intake.Validator in front of it: the items' terms and numbers must be
// the owner's policy's.
func (gs *Grants) HandleLease(ctx context.Context, from string, r lease.Refresh) []peer.LeaseAnswer {
	out := make([]peer.LeaseAnswer, len(r.Items))
	now := gs.now()
	var writes []redisbackend.TAT
	var granted []int
	for i, it := range r.Items {
		persist, err := gs.grant(ctx, it, now, &out[i])
		if err != nil {
			out[i] = peer.LeaseAnswer{Err: err}
			continue
		}
		if out[i].Outcome == lease.Granted && gs.owner.HasRedis() {
			writes = append(writes, redisbackend.TAT{Key: it.Key, TAT: persist, Now: now})
			granted = append(granted, i)
		}
	}
	if len(writes) > 0 {
		if err := gs.owner.WriteThrough(ctx, writes, gs.cfg.WriteTimeout); err != nil {
			for _, i := range granted {
				gs.revoke(r.Items[i], out[i].Answer, now)
				out[i] = peer.LeaseAnswer{Err: fmt.Errorf("leaselink: lease not stored, not granted: %w", err)}
			}
		}
	}
	for i := range out {
		gs.count(r.Items[i].Label, out[i])
	}
	return out
}

// count counts one answered lease request of limit.
func (gs *Grants) count(limit string, a peer.LeaseAnswer) {
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
func (gs *Grants) grant(ctx context.Context, it lease.Request, now int64, ans *peer.LeaseAnswer) (int64, error) {
	var persist int64
	notOwner, err := gs.owner.UpdateOwned(ctx, it.Group, it.Key, now, true, func(tat int64, _ bool) (int64, error) {
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
	ans.NotOwner = notOwner
	return persist, err
}

// revoke settles a grant whose write-through failed as returned unspent:
// the peer is answered an error, so nobody can spend its units, and they
// go back to the key at once instead of stranding until the lease expires
// (and keeping the peer busy until then). What the failed write may have
// stored in Redis is only higher, never lower. A key dropped meanwhile
// keeps its ledger's floor until the lease expires.
func (gs *Grants) revoke(it lease.Request, a lease.Answer, now int64) {
	it.Demand, it.Return = 0, lease.Return{Grantor: a.Grantor, Lease: a.Lease, Unspent: a.Units}
	_ = gs.owner.UpdateHeld(it.Group, it.Key, now, func(tat int64, held bool) (int64, error) {
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

// SweepGrants folds every expired lease into its key's TAT, one key at a
// time under that key's lock, so no decision sees a key between the two.
// The refresh loop (Link.Tick) calls it every sweep. Safe for concurrent
// use.
func (gs *Grants) SweepGrants() {
	now := gs.now()
	gs.mu.RLock()
	due := gs.g.Due(now)
	gs.mu.RUnlock()
	for _, d := range due {
		// A key handed off is skipped (Forget drops its ledger); a refusal
		// (dropped meanwhile, or memory full) leaves the lease in the
		// ledger, where Effective keeps its floor until a later sweep.
		_, _ = gs.owner.UpdateOwned(context.Background(), d.Group, d.Key, now, false, func(tat int64, _ bool) (int64, error) {
			gs.mu.Lock()
			defer gs.mu.Unlock()
			return gs.g.Expire(d.Group, d.Key, tat, now), nil
		})
	}
	gs.mu.Lock()
	gs.active.Store(int64(gs.g.Keys()))
	gs.mu.Unlock()
}
