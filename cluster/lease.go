package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/breaker"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/lease"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/peer"
	"github.com/weirhq/weir/policy"
	"github.com/weirhq/weir/redisbackend"
)

// Leases wire package lease into the node. As an owner, a node grants
// batches of a hot leasable key's units to peers (HandleLease) and decides
// every request on such a key on the ledger's Effective TAT, so units out
// on leases are never refilled. As a peer, it spends units it holds
// without asking the owner (spendLease in Decide) and refreshes them in
// one batched RPC per owner per tick (LeaseTick). lease/design.md has the
// accounting and the protocol; docs/architecture.md ("Leases") the costs.

// LeaseConfig tunes leasing on a node.
type LeaseConfig struct {
	// Grantor and Holder tune the two sides (package lease). Their Name is
	// set by EnableLeases: the node's name plus LeaseDeps.Incarnation.
	Grantor lease.GrantorConfig
	Holder  lease.HolderConfig
	// Tick is how often LeaseTick runs in RunLeases: a refresh is sent
	// within one tick of being due. Keep it well under the shortest lease
	// TTL.
	Tick time.Duration
	// SweepEvery is how often a tick also forgets idle keys (holder) and
	// folds expired leases (owner).
	SweepEvery time.Duration
	// RPCTimeout bounds one lease refresh round trip; a refresh that takes
	// longer is abandoned (its returned units strand at the owner).
	RPCTimeout time.Duration
	// WriteTimeout bounds an owner's write-through of grant TATs to Redis
	// before it answers.
	WriteTimeout time.Duration
}

// DefaultLeaseConfig returns package lease's defaults, a 10ms tick, a 1s
// sweep, a 100ms refresh timeout (a reply later than that is worth little
// of a 250ms lease, which counts from the send) and a 50ms write-through
// timeout.
func DefaultLeaseConfig() LeaseConfig {
	return LeaseConfig{Grantor: lease.DefaultGrantorConfig(), Holder: lease.DefaultHolderConfig(),
		Tick: 10 * time.Millisecond, SweepEvery: time.Second, RPCTimeout: 100 * time.Millisecond, WriteTimeout: 50 * time.Millisecond}
}

// Validate reports whether c is usable (the sides' names aside, which
// EnableLeases sets). It changes nothing.
func (c LeaseConfig) Validate() error {
	g, h := c.Grantor, c.Holder
	g.Name, h.Name = "x", "x"
	if err := g.Validate(); err != nil {
		return fmt.Errorf("cluster: leases: %w", err)
	}
	if err := h.Validate(); err != nil {
		return fmt.Errorf("cluster: leases: %w", err)
	}
	if c.Tick <= 0 || c.SweepEvery <= 0 || c.RPCTimeout <= 0 || c.WriteTimeout <= 0 {
		return errors.New("cluster: leases: tick, sweep, RPC and write timeouts must be positive")
	}
	return nil
}

// LeaseDeps are what leasing needs beyond the Cluster's own Deps.
type LeaseDeps struct {
	// Leaser carries refreshes to owners (peer.Client, or peertest).
	Leaser peer.Leaser
	// Policies says which limits are leasable and on what terms.
	Policies interface{ Current() *policy.Policy }
	// Incarnation distinguishes this process from earlier ones of the same
	// node name (a boot time or random token): lease numbers restart at 1.
	Incarnation string
	// Now is the clock for grants (Unix nanoseconds, the TATs' time base)
	// and, as durations since EnableLeases, for held leases. nil:
	// time.Now.
	Now func() time.Time
}

// leases is a node's lease state. Lock order: a memstore shard lock, then
// gmu; hmu is never held with either.
type leases struct {
	cfg  LeaseConfig
	deps LeaseDeps
	born time.Time
	// gmu guards g: decisions read their keys' Effective TATs under its
	// read lock, concurrently; everything that changes g takes it whole.
	gmu    sync.RWMutex
	g      *lease.Grantor
	active atomic.Int64 // g.Keys(), read without gmu by decisions
	hmu    sync.Mutex   // guards h, swept and settled
	h      *lease.Holder
	swept  int64 // holder time of the last sweep
	// settled, by owner, is closed when the refresh in flight to that
	// owner is answered or given up: requests on leasable keys wait on it
	// (awaitLease). Created by the first waiter.
	settled  map[string]chan struct{}
	probes   sync.WaitGroup // probes sent by probeLocked
	metrics  *leaseMetrics
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	running  atomic.Bool // RunLeases started
}

// EnableLeases turns leasing on. Call it once, after New and before the
// first decision; without it the node neither grants nor holds leases.
func (c *Cluster) EnableLeases(cfg LeaseConfig, deps LeaseDeps, reg prometheus.Registerer) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if deps.Leaser == nil || deps.Policies == nil || deps.Incarnation == "" {
		return errors.New("cluster: leases need a leaser, a policy source and an incarnation")
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	name := c.cfg.LocalName + "#" + deps.Incarnation
	cfg.Grantor.Name, cfg.Holder.Name = name, name
	g, err := lease.NewGrantor(cfg.Grantor)
	if err != nil {
		return err
	}
	h, err := lease.NewHolder(cfg.Holder)
	if err != nil {
		return err
	}
	l := &leases{cfg: cfg, deps: deps, born: deps.Now(), g: g, h: h, settled: make(map[string]chan struct{}),
		stop: make(chan struct{}), done: make(chan struct{})}
	if l.metrics, err = newLeaseMetrics(reg, l); err != nil {
		return err
	}
	c.leases = l
	return nil
}

// wallNow is the owner's time base (Unix nanoseconds).
func (l *leases) wallNow() int64 { return l.deps.Now().UnixNano() }

// monoNow is the holder's time base: nanoseconds since EnableLeases.
func (l *leases) monoNow() int64 { return int64(l.deps.Now().Sub(l.born)) }

// leaseAdjust returns the memstore hook that decides group's keys on the
// ledger's Effective TAT at now, or nil when no key has a ledger.
func (c *Cluster) leaseAdjust(group string, now int64) memstore.Adjust {
	l := c.leases
	if l == nil || l.active.Load() == 0 {
		return nil
	}
	return func(key string, tat int64) int64 {
		l.gmu.RLock()
		defer l.gmu.RUnlock()
		return l.g.Effective(group, key, tat, now)
	}
}

var _ peer.LeaseHandler = (*Cluster)(nil)

// HandleLease answers a peer's lease refresh as the owner: per item, it
// settles the returned lease and grants, caps or denies a new one against
// the key's TAT under the key's lock, then writes the TATs of the grants
// through to Redis before answering. Items of groups this node does not
// own answer NotOwner; a grant whose write-through failed answers an error
// (its units stay charged and strand: under-admission, never excess).
func (c *Cluster) HandleLease(ctx context.Context, from string, r lease.Refresh) []peer.LeaseAnswer {
	out := make([]peer.LeaseAnswer, len(r.Items))
	l := c.leases
	if l == nil {
		for i := range out {
			out[i].Err = errors.New("cluster: this node grants no leases")
		}
		return out
	}
	now := l.wallNow()
	var writes []redisbackend.TAT
	var granted []int
	for i, it := range r.Items {
		persist, err := c.grant(ctx, l, it, now, &out[i])
		if err != nil {
			out[i] = peer.LeaseAnswer{Err: err}
			continue
		}
		if out[i].Outcome == lease.Granted && c.deps.Redis != nil {
			writes = append(writes, redisbackend.TAT{Key: it.Key, TAT: persist, Now: now})
			granted = append(granted, i)
		}
	}
	if err := c.writeThrough(ctx, l, writes); err != nil {
		for _, i := range granted {
			c.revoke(l, r.Items[i], out[i].Answer, now)
			out[i] = peer.LeaseAnswer{Err: fmt.Errorf("cluster: lease not stored, not granted: %w", err)}
		}
	}
	for i := range out {
		l.metrics.grant(r.Items[i].Label, out[i])
	}
	return out
}

// grant decides one item into ans and returns the TAT to persist for it:
// the grant's TAT raised by the key's reservation folded at its latest
// expiry, so that an owner that loads it after a crash or hand-off never
// refills units that peers may still spend (see lease/design.md §5).
func (c *Cluster) grant(ctx context.Context, l *leases, it lease.Request, now int64, ans *peer.LeaseAnswer) (int64, error) {
	epoch := c.deps.Mem.Epoch() // before the ownership check: see decideLocal
	if owner := c.owner(it.Group); owner != c.cfg.LocalName {
		ans.NotOwner = owner
		return 0, nil
	}
	if err := c.checkThawed(); err != nil {
		return 0, err
	}
	sr := limiter.StoreRequest{Group: it.Group, Keys: []string{it.Key}, Limits: []gcra.Limit{it.Limit}, Cost: 1, Now: now}
	if err := c.ensureLoaded(ctx, &sr, epoch); err != nil {
		return 0, c.staleAsMoving(it.Group, err)
	}
	var persist int64
	err := c.deps.Mem.UpdateAt(epoch, it.Group, it.Key, now, func(tat int64, _ bool) (int64, error) {
		l.gmu.Lock()
		defer l.gmu.Unlock()
		a, err := l.g.Grant(tat, now, it)
		if err != nil {
			return 0, err
		}
		res := l.g.Reservation(it.Group, it.Key, now)
		persist = max(a.TAT, res.Until+res.Units*it.Limit.Interval)
		l.active.Store(int64(l.g.Keys()))
		ans.Answer = a
		return a.TAT, nil
	})
	return persist, c.staleAsMoving(it.Group, err)
}

// revoke settles a grant whose write-through failed as returned unspent:
// the peer is answered an error, so nobody can spend its units, and they
// go back to the key at once instead of stranding until the lease expires
// (and keeping the peer busy until then). What the failed write may have
// stored in Redis is only higher, never lower. A key dropped meanwhile
// keeps its ledger's floor until the lease expires.
func (c *Cluster) revoke(l *leases, it lease.Request, a lease.Answer, now int64) {
	it.Demand, it.Return = 0, lease.Return{Grantor: a.Grantor, Lease: a.Lease, Unspent: a.Units}
	_ = c.deps.Mem.UpdateAt(c.deps.Mem.Epoch(), it.Group, it.Key, now, func(tat int64, held bool) (int64, error) {
		if !held {
			return 0, memstore.ErrStaleEpoch // dropped: do not re-create it
		}
		l.gmu.Lock()
		defer l.gmu.Unlock()
		ans, err := l.g.Grant(tat, now, it)
		l.active.Store(int64(l.g.Keys()))
		return ans.TAT, err
	})
}

// writeThrough stores grant TATs in Redis within WriteTimeout. No Redis,
// nothing to write. An open Redis breaker fails it at once, but its own
// failures are excused: a grant that is not stored costs only forwards,
// and a write slowed past its tight timeout on a loaded machine must not
// open the breaker that guards every load and strict decision.
func (c *Cluster) writeThrough(ctx context.Context, l *leases, tats []redisbackend.TAT) error {
	if len(tats) == 0 {
		return nil
	}
	done, err := c.guard(redisBreaker)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, l.cfg.WriteTimeout)
	defer cancel()
	err = c.deps.Redis.StoreTATs(wctx, tats)
	if err != nil {
		done(fmt.Errorf("lease write-through: %w: %w", breaker.ErrExcused, err))
	} else {
		done(nil)
	}
	c.metrics.redisCommands.WithLabelValues("lease_store").Add(float64(len(tats)))
	return err
}

// sweepGrants folds every expired lease into its key's TAT, one key at a
// time under that key's lock, so no decision sees a key between the two.
func (c *Cluster) sweepGrants(l *leases, now int64) {
	l.gmu.RLock()
	due := l.g.Due(now)
	l.gmu.RUnlock()
	for _, d := range due {
		epoch := c.deps.Mem.Epoch() // before the ownership check: see decideLocal
		if c.owner(d.Group) != c.cfg.LocalName {
			continue // handed off: dropLeases forgets the ledger
		}
		// A refusal (dropped meanwhile, or memory full) leaves the lease in
		// the ledger, where Effective keeps its floor until a later sweep.
		_ = c.deps.Mem.UpdateAt(epoch, d.Group, d.Key, now, func(tat int64, _ bool) (int64, error) {
			l.gmu.Lock()
			defer l.gmu.Unlock()
			return l.g.Expire(d.Group, d.Key, tat, now), nil
		})
	}
	l.gmu.Lock()
	l.active.Store(int64(l.g.Keys()))
	l.gmu.Unlock()
}

// dropLeases forgets the ledgers of keys handed off. Their reservations
// are already in Redis: every grant wrote its folded TAT through.
func (c *Cluster) dropLeases(lost func(key string) bool) {
	l := c.leases
	if l == nil {
		return
	}
	l.gmu.Lock()
	defer l.gmu.Unlock()
	l.g.Drop(func(_, key string) bool { return lost(key) })
	l.active.Store(int64(l.g.Keys()))
}
