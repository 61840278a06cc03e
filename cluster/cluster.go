package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/breaker"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/limitkey"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/peer"
	"github.com/weirhq/weir/redisbackend"
	"github.com/weirhq/weir/ring"
)

// Config tunes a Cluster.
type Config struct {
	// LocalName is this node's name in the ring.
	LocalName string
	// LoadTimeout bounds loading a key's TAT from Redis before an owner's
	// first decision on it (always inside the caller's deadline).
	LoadTimeout time.Duration
	// HandoffTimeout bounds flushing the TATs of groups that move away.
	HandoffTimeout time.Duration
	// StrictTimeout bounds one pipelined strict call to Redis.
	StrictTimeout time.Duration
	// MaxStrictBatch caps the decisions in one strict pipeline.
	MaxStrictBatch int
	// FreezeLimit is the longest the process may go unscheduled (frozen)
	// and still trust its in-memory TATs; after a longer freeze its peers
	// may have decided its groups, so it reloads them (see freeze.go).
	// Keep it well below the gossip failure-detection time.
	FreezeLimit time.Duration
	// Forward tunes how long a forward waits for a slow owner (forward.go).
	Forward ForwardConfig
	// PersistSlack is how many units of a key's limit an owner's crash may
	// admit beyond the write-behind's bound (docs/architecture.md): an
	// admission that leaves the key at most this many units from rested is
	// not written to Redis (see mustPersist). 0 writes every admission.
	// At most MaxPersistSlack.
	PersistSlack int64
	// MaxSwept bounds the keys remembered as swept, so that their next
	// decision needs no load (see sweptSet): about 16 bytes each. 0
	// remembers none.
	MaxSwept int
}

// MaxPersistSlack bounds Config.PersistSlack.
const MaxPersistSlack = 1000

// DefaultConfig returns timeouts of a few milliseconds for the decision
// path and seconds for hand-off.
func DefaultConfig() Config {
	return Config{LoadTimeout: 20 * time.Millisecond, HandoffTimeout: 2 * time.Second, StrictTimeout: 20 * time.Millisecond, MaxStrictBatch: 256,
		FreezeLimit: time.Second, Forward: DefaultForwardConfig(), PersistSlack: 1, MaxSwept: 1 << 20}
}

// Validate reports whether c is usable. It changes nothing.
func (c Config) Validate() error {
	switch {
	case c.LocalName == "":
		return errors.New("cluster: local name is required")
	case c.LoadTimeout <= 0 || c.HandoffTimeout <= 0 || c.StrictTimeout <= 0 || c.FreezeLimit <= 0:
		return errors.New("cluster: timeouts must be positive")
	case c.MaxStrictBatch <= 0:
		return errors.New("cluster: max strict batch must be positive")
	case c.PersistSlack < 0 || c.PersistSlack > MaxPersistSlack:
		return fmt.Errorf("cluster: persist slack %d outside [0, %d]", c.PersistSlack, MaxPersistSlack)
	case c.MaxSwept < 0:
		return fmt.Errorf("cluster: max swept %d is negative", c.MaxSwept)
	}
	return c.Forward.Validate()
}

// WriteBehind persists TATs in the background (*writebehind.Writer).
type WriteBehind interface {
	Mark(key string, tat int64)
	FlushKeys(ctx context.Context, match func(key string) bool) error
	Flush(ctx context.Context) error
}

// Deps are the parts a Cluster works with. Redis and WriteBehind are both
// nil when no Redis is configured.
type Deps struct {
	Ring        *ring.Ring
	Forwarder   peer.Forwarder
	Mem         *memstore.Store
	Redis       *redisbackend.Backend
	WriteBehind WriteBehind
	// Breakers, if set, guard every call to Redis (breaker "redis") and to
	// each peer (breaker named by its address), so a dead dependency costs
	// one fast failure instead of a timeout per request.
	Breakers *breaker.Set
	// Now is the clock freeze detection measures gaps on (see freeze.go);
	// nil means time.Now. Tests pass a fake one.
	Now func() time.Time
	// Regions, if set, decides scope: global keys at this region's share
	// of their limits (region.go); nil enforces every limit whole.
	Regions Regions
}

// Cluster routes decisions to owners and decides for the groups it owns.
type Cluster struct {
	cfg     Config
	deps    Deps
	logger  *slog.Logger
	metrics *metrics
	addrs   atomic.Pointer[map[string]string] // member name -> peer address
	strict  *strictQueue
	// debts and debtMetrics account fallback debt; see debt.go.
	debts       *debtTable
	debtMetrics *debtMetrics
	rtt         rttTable   // owners' observed round trips (forward.go)
	mu          sync.Mutex // serialises SetMembers, Handoff and thawing
	// failed and cutOff (under mu) notice this node being on the small
	// side of a split; see rejoinedLocked.
	failed map[string]bool
	cutOff bool
	// born and lastBeat (nanoseconds since born, on now) are the
	// heartbeat that finds freezes; thawing is set from finding one until
	// the heartbeat has reloaded, and thawNow asks the heartbeat to start.
	now      func() time.Time
	born     time.Time
	lastBeat atomic.Int64
	beating  atomic.Bool // RunHeartbeat is running
	thawing  atomic.Bool
	thawNow  chan struct{}
	// loadTATs reads persisted TATs (deps.Redis.LoadTATs; tests wrap it).
	loadTATs func(ctx context.Context, keys []string) ([]int64, error)
	// swept remembers keys swept as rested (nil without Redis or with
	// MaxSwept 0); see sweptSet.
	swept *sweptSet
	// leases is nil until EnableLeases (lease.go).
	leases *leases
}

var (
	_ limiter.Store = (*Cluster)(nil)
	_ peer.Handler  = (*Cluster)(nil)
)

// New returns a Cluster. Call SetMembers before the first decision; until
// then this node owns every group.
func New(cfg Config, deps Deps, logger *slog.Logger, reg prometheus.Registerer) (*Cluster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Ring == nil || deps.Forwarder == nil || deps.Mem == nil {
		return nil, errors.New("cluster: ring, forwarder and memory store are required")
	}
	if (deps.Redis == nil) != (deps.WriteBehind == nil) {
		return nil, errors.New("cluster: Redis and write-behind go together")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, deps: deps, logger: logger, metrics: m, now: deps.Now, thawNow: make(chan struct{}, 1), debts: newDebtTable()}
	if c.now == nil {
		c.now = time.Now
	}
	c.born = c.now()
	if c.debtMetrics, err = newDebtMetrics(reg); err != nil {
		return nil, err
	}
	c.addrs.Store(&map[string]string{})
	if deps.Redis != nil {
		c.strict = newStrictQueue(deps.Redis, cfg.StrictTimeout, cfg.MaxStrictBatch)
		c.loadTATs = deps.Redis.LoadTATs
		if cfg.MaxSwept > 0 {
			c.swept = newSweptSet(cfg.MaxSwept)
		}
	}
	return c, nil
}

// Decide is the limiter's store: decide locally when this node owns
// r.Group, otherwise forward to the owner.
func (c *Cluster) Decide(ctx context.Context, r *limiter.StoreRequest, out []gcra.Result) (gcra.Result, error) {
	owner := c.owner(r.Group)
	if owner == c.cfg.LocalName {
		agg, err := c.decideLocal(ctx, r, out)
		if err == nil {
			c.repay(owner, r.Now)
		}
		return agg, err
	}
	if agg, ok := c.spendLease(ctx, r, owner, out); ok {
		return agg, nil
	}
	// Copies: a forward that times out may still be queued or sent after
	// Decide returns, and the limiter reuses r (limiter.Store).
	it := peer.Item{Group: r.Group, Keys: slices.Clone(r.Keys), Limits: slices.Clone(r.Limits), Cost: r.Cost, Now: r.Now, Strict: r.Strict}
	res, err := c.forward(ctx, owner, it)
	if err == nil && res.NotOwner != "" && res.NotOwner != owner {
		c.metrics.notOwner.Inc()
		if res.NotOwner == c.cfg.LocalName {
			return c.decideLocal(ctx, r, out)
		}
		res, err = c.forward(ctx, res.NotOwner, it)
	}
	switch {
	case err != nil:
		if ctx.Err() != nil {
			return gcra.Result{}, err
		}
		return gcra.Result{}, &limiter.UnavailableError{Reason: "owner_unreachable", Err: err}
	case res.NotOwner != "":
		return gcra.Result{}, &limiter.UnavailableError{Reason: "ownership_changing", Err: fmt.Errorf("owner of group %q is moving to %s", r.Group, res.NotOwner)}
	case res.Err != nil:
		reason := res.Reason
		if reason == "" {
			reason = "owner_failed"
		}
		return gcra.Result{}, &limiter.UnavailableError{Reason: reason, Err: res.Err}
	}
	if len(res.Results) != len(r.Keys) {
		return gcra.Result{}, fmt.Errorf("cluster: owner answered %d results for %d limits", len(res.Results), len(r.Keys))
	}
	copy(out, res.Results)
	c.repay(owner, r.Now)
	if !res.Overall.Allowed {
		c.noteLeaseDenials(r, out)
	}
	return res.Overall, nil
}

// HandleDecide answers work forwarded by peers: it decides the items this
// node owns and names the owner it believes in for the rest.
//
// The sender gives up at its forward deadline and counts that against this
// node's breaker, which would then fail every group this node owns. So the
// answer must arrive in time even when Redis is slow: work that needs Redis
// stops a quarter of the sender's remaining time early and the item answers
// with its error and failure reason, and items that need Redis are decided
// concurrently, so one slow load cannot hold back the items this node can
// decide from memory.
func (c *Cluster) HandleDecide(ctx context.Context, from string, items []peer.Item) []peer.Result {
	rctx, cancel := replyContext(ctx)
	defer cancel()
	results := make([]peer.Result, len(items))
	type decider func(context.Context, *limiter.StoreRequest, []gcra.Result) (gcra.Result, error)
	decide := func(i int, with decider) {
		it := &items[i]
		r := limiter.StoreRequest{Group: it.Group, Keys: it.Keys, Limits: it.Limits, Cost: it.Cost, Now: it.Now, Strict: it.Strict}
		out := make([]gcra.Result, len(it.Keys))
		agg, err := with(rctx, &r, out)
		results[i] = peer.Result{Overall: agg, Results: out, Err: err}
		switch ue, ok := errors.AsType[*limiter.UnavailableError](err); {
		case ok:
			results[i].Reason = ue.Reason
		case err != nil && rctx.Err() != nil && ctx.Err() == nil:
			// The reply budget ran out while this node waited on Redis.
			results[i].Reason = "state_load_failed"
			if it.Strict {
				results[i].Reason = "redis_unavailable"
			}
		}
	}
	var slow sync.WaitGroup
	for i := range items {
		it := &items[i]
		epoch := c.deps.Mem.Epoch() // before inMemory looks: see decideHeld
		switch owner := c.owner(it.Group); {
		case owner != c.cfg.LocalName:
			results[i].NotOwner = owner
		case it.Debt:
			slow.Go(func() { results[i] = c.chargeDebt(rctx, it) })
		case c.inMemory(epoch, it):
			decide(i, func(ctx context.Context, r *limiter.StoreRequest, out []gcra.Result) (gcra.Result, error) {
				return c.decideHeld(ctx, epoch, r, out)
			})
		default:
			slow.Go(func() { decide(i, c.decideLocal) })
		}
	}
	slow.Wait()
	return results
}

// replyContext ends a quarter of ctx's remaining time before ctx does,
// leaving that much for the answer to travel back.
func replyContext(ctx context.Context) (context.Context, context.CancelFunc) {
	d, ok := ctx.Deadline()
	if !ok {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, d.Add(-time.Until(d)/4))
}

// inMemory reports whether it can be decided from memory alone at epoch,
// with decideHeld: any item when there is no Redis; otherwise a fast item
// whose keys this node holds or swept (known), unless the node has just
// been frozen (decideLocal falls back until the heartbeat has reloaded).
func (c *Cluster) inMemory(epoch uint64, it *peer.Item) bool {
	if c.deps.Redis == nil {
		return true
	}
	if (it.Strict && c.strict != nil) || c.thawPending() {
		return false
	}
	for _, k := range it.Keys {
		if !c.known(epoch, it.Group, k) {
			return false
		}
	}
	return true
}

// Members returns how many members this node currently sees, itself
// included; 1 before the first SetMembers. It is the member count for
// fallback shares (limiter.WithMembers). Safe for concurrent use.
func (c *Cluster) Members() int { return max(1, len(*c.addrs.Load())) }

// owner is the node that decides group; this node while the ring is empty.
func (c *Cluster) owner(group string) string {
	if o, ok := c.deps.Ring.Owner(group); ok {
		return o
	}
	return c.cfg.LocalName
}

// SetMembers installs a new membership (name -> peer gRPC address), rebuilds
// the ring and hands off the groups this node no longer owns: their pending
// TATs are flushed to Redis and their keys dropped from memory, so a later
// return of ownership reloads them. Members that disappear are taken to
// have left on purpose; use SetMembersFailed when the caller knows which
// failed. Members that reappear stop counting as failed.
func (c *Cluster) SetMembers(ctx context.Context, members map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setMembersLocked(ctx, members, slices.Collect(maps.Keys(c.failed)))
}

// SetMembersFailed is SetMembers for a caller that also knows which members
// failed — were declared dead, as on the far side of a split — rather than
// left gracefully (membership.Membership.Failed). Only failures count
// towards noticing that this node was cut off from most of the cluster
// (see rejoinedLocked), so a planned scale-down does not make the next join
// reload every key.
func (c *Cluster) SetMembersFailed(ctx context.Context, members map[string]string, failed []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setMembersLocked(ctx, members, failed)
}

func (c *Cluster) setMembersLocked(ctx context.Context, members map[string]string, failed []string) {
	c.failed = make(map[string]bool, len(failed))
	for _, name := range failed {
		if _, alive := members[name]; !alive {
			c.failed[name] = true
		}
	}
	old := *c.addrs.Load()
	rejoined := c.rejoinedLocked(len(old), len(members))
	if maps.Equal(old, members) {
		return
	}
	names := make([]string, 0, len(members))
	for name := range members {
		names = append(names, name)
	}
	c.addrs.Store(new(maps.Clone(members)))
	c.rtt.retain(members)
	if err := c.deps.Ring.Set(names); err != nil {
		c.logger.Error("ring rebuild failed; keeping the previous ring", "err", err)
		return
	}
	c.metrics.ringChanges.Inc()
	c.logger.Info("ring changed", "members", len(names))
	if rejoined {
		// This node was on the small side of a split: the other side may
		// have decided the groups it kept, from Redis. Reload them all.
		c.metrics.rejoins.Inc()
		c.logger.Warn("rejoined after being cut off from most of the cluster; reloading state from Redis", "members", len(members))
		c.dropLocked(ctx, func(string) bool { return true })
		return
	}
	c.dropLocked(ctx, func(key string) bool {
		group, _ := limitkey.Group(key) // unescaped: the value decisions route by
		return c.owner(group) != c.cfg.LocalName
	})
}

// rejoinedLocked tracks whether this node is cut off from most of the
// cluster — the members it sees are no more than those that failed — and
// reports true when the ring grows again after that. While cut off, the
// majority side declares this node dead and decides its groups from Redis,
// so what this node kept in memory may be behind. Members that left on
// purpose do not count: they handed their groups off, and nobody decided
// this node's groups behind its back.
func (c *Cluster) rejoinedLocked(before, after int) bool {
	rejoined := c.cutOff && after > before
	c.cutOff = len(c.failed) > 0 && after <= len(c.failed)
	return rejoined
}

// Handoff flushes every pending TAT and drops all owned state: the node is
// leaving, and whoever takes its groups will load them from Redis.
func (c *Cluster) Handoff(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(ctx, func(string) bool { return true })
}

// dropLocked flushes the pending TATs of the lost keys, drops the keys
// from memory, and flushes again. Dropping advances the memory's epoch, so
// decisions already past their ownership check cannot re-create a dropped
// key (see decideLocal); the second flush sends what decisions admitted
// between the first flush and the drop. The first flush comes before the
// drop so that, when this node keeps ownership (a thaw, a rejoin), its
// next load already sees its own latest TATs. Both flushes share
// HandoffTimeout.
func (c *Cluster) dropLocked(ctx context.Context, lost func(key string) bool) {
	start := c.now()
	fctx, cancel := context.WithTimeout(ctx, c.cfg.HandoffTimeout)
	defer cancel()
	c.markHeld(lost)
	err := c.flushKeys(fctx, lost)
	n := c.deps.Mem.DeleteFunc(lost)
	c.dropLeases(lost)
	if err == nil {
		err = c.flushKeys(fctx, lost)
	}
	if err != nil {
		c.metrics.handoffErrors.Inc()
		c.logger.Warn("hand-off flush incomplete; the new owner may see older TATs", "err", err)
	}
	c.metrics.handedOff.Add(float64(n))
	if n > 0 {
		c.logger.Info("handed off keys", "keys", n, "took", c.now().Sub(start))
	}
}

func (c *Cluster) flushKeys(ctx context.Context, match func(key string) bool) error {
	if c.deps.WriteBehind == nil {
		return nil
	}
	return c.deps.WriteBehind.FlushKeys(ctx, match)
}
