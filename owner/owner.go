package owner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/breaker"
	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/redisbackend"
	"github.com/weirhq/weir/reservation"
	"github.com/weirhq/weir/rested"
)

// Config tunes an Owner.
type Config struct {
	// LocalName is this node's name in the ring.
	LocalName string
	// LoadTimeout bounds loading a key's TAT from Redis before an owner's
	// first decision on it (always inside the caller's deadline).
	LoadTimeout time.Duration
	// HandoffTimeout bounds flushing the TATs of groups that move away.
	HandoffTimeout time.Duration
	// FreezeLimit is the longest the process may go unscheduled (frozen)
	// and still trust its in-memory TATs; after a longer freeze its peers
	// may have decided its groups, so it reloads them (see freeze.go).
	// Keep it well below the gossip failure-detection time.
	FreezeLimit time.Duration
	// PersistSlack is how many units of a key's limit an owner's crash may
	// admit beyond the write-behind's bound (docs/architecture.md): an
	// admission that leaves the key at most this many units from rested is
	// not written to Redis (see mustPersist). 0 writes every admission.
	// At most MaxPersistSlack.
	PersistSlack int64
	// Rested decides which keys absent from memory need no load: those
	// swept as rested, and those of groups owned for longer than their
	// span plus a margin for ring propagation (package rested).
	Rested rested.Config
	// MaxPermitKeys caps the concurrency keys whose permit sets owner
	// memory holds, as memstore's MaxKeys (--max-keys) caps TATs: a new
	// key beyond it evicts empty sets first, then is refused
	// (memory_full). 0 means no cap.
	MaxPermitKeys int
}

// MaxPersistSlack bounds Config.PersistSlack.
const MaxPersistSlack = 1000

// DefaultConfig returns timeouts of a few milliseconds for the decision
// path and seconds for hand-off.
func DefaultConfig() Config {
	return Config{LoadTimeout: 20 * time.Millisecond, HandoffTimeout: 2 * time.Second, FreezeLimit: time.Second,
		PersistSlack: 1, Rested: rested.DefaultConfig()}
}

// Validate reports whether c is usable. It changes nothing.
func (c Config) Validate() error {
	switch {
	case c.LocalName == "":
		return errors.New("owner: local name is required")
	case c.LoadTimeout <= 0 || c.HandoffTimeout <= 0 || c.FreezeLimit <= 0:
		return errors.New("owner: timeouts must be positive")
	case c.MaxPermitKeys < 0:
		return fmt.Errorf("owner: max permit keys %d is negative", c.MaxPermitKeys)
	case c.PersistSlack < 0 || c.PersistSlack > MaxPersistSlack:
		return fmt.Errorf("owner: persist slack %d outside [0, %d]", c.PersistSlack, MaxPersistSlack)
	}
	if err := c.Rested.Validate(); err != nil {
		return fmt.Errorf("owner: %w", err)
	}
	return nil
}

// Ring says which node owns a group (forward.Routes, or a *ring.Ring
// wrapped by a test). Safe for concurrent use.
type Ring interface {
	// Owner returns the name of group's owner; this node's own name while
	// the ring is empty.
	Owner(group string) string
}

// Redis is the part of Redis an owner reads and writes TATs with
// (*redisbackend.Backend; redistest's in-memory twin in tests).
type Redis interface {
	LoadTATs(ctx context.Context, keys []string) ([]int64, error)
	StoreTATs(ctx context.Context, tats []redisbackend.TAT) error
}

// Strict decides strict requests in Redis (*redisbackend.StrictQueue,
// which coalesces concurrent ones into pipelines). It fails at once with
// an error wrapping redisbackend.ErrStrictQueueFull when too many wait.
type Strict interface {
	Decide(ctx context.Context, req redisbackend.DecideRequest) (redisbackend.Decision, error)
}

// WriteBehind persists TATs in the background (*writebehind.Writer).
type WriteBehind interface {
	Mark(key string, tat int64)
	FlushKeys(ctx context.Context, match func(key string) bool) error
	Flush(ctx context.Context) error
}

var (
	_ Redis  = (*redisbackend.Backend)(nil)
	_ Strict = (*redisbackend.StrictQueue)(nil)
)

// Deps are the parts an Owner works with. Redis, Strict and WriteBehind
// are all nil when no Redis is configured, or all set.
type Deps struct {
	Ring        Ring
	Mem         *memstore.Store
	Redis       Redis
	Strict      Strict
	WriteBehind WriteBehind
	// Breakers, if set, guard every call to Redis (breaker "redis"), so a
	// dead Redis costs one fast failure instead of a timeout per request.
	Breakers *breaker.Set
	// Clock measures freeze gaps and durations, and the time left before
	// a forwarded batch's deadline: it must tell the time contexts'
	// deadlines are set on (a manual clock in tests starts at the real
	// time). nil means clock.Real().
	Clock clock.Clock
	// Regions, if set, decides scope: global keys at this region's share
	// of their limits (region.go); nil enforces every limit whole.
	Regions Regions
	// Permits, if set, persists concurrency keys' permit sets (acquire
	// write-through, release and renew written too); nil keeps them in
	// memory only, and a moved group's permits start empty.
	Permits Permits
}

// Owner is the owner's synchronous state machine: it decides the groups
// this node owns from memory, loading first touches from Redis, and
// answers forwarded work, lease refreshes and debts. It starts no
// goroutines: the caller drives its heartbeat (Beat) and its drops.
type Owner struct {
	cfg     Config
	deps    Deps
	clk     clock.Clock
	logger  *slog.Logger
	metrics *metrics
	debt    *prometheus.CounterVec // weir_fallback_debt_units_total, charged and forgiven
	mu      sync.Mutex             // serialises drops (hand-off, rejoin, thaw)
	// born and lastBeat (nanoseconds since born, on clk) are the
	// heartbeat that finds freezes; thawing is set from finding one until
	// the heartbeat has reloaded, and thawNow asks the heartbeat to run.
	born     time.Time
	lastBeat atomic.Int64
	beating  atomic.Bool // StartHeartbeat ran, StopHeartbeat did not
	thawing  atomic.Bool
	thawNow  chan struct{}
	// rested says which absent keys need no load (nil without Redis).
	rested *rested.Rule
	// leases is nil until EnableLeases (grant.go).
	leases Leases
	// reserve is the open reservations (reserve.go).
	reserve reserveState
	// permits holds concurrency keys' permit sets (permits*.go).
	permits *permitTable
	pm      *permitMetrics
}

// New returns an Owner. Its Ring decides which groups it owns.
func New(cfg Config, deps Deps, logger *slog.Logger, reg prometheus.Registerer) (*Owner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Ring == nil || deps.Mem == nil {
		return nil, errors.New("owner: ring and memory store are required")
	}
	if (deps.Redis == nil) != (deps.WriteBehind == nil) || (deps.Redis == nil) != (deps.Strict == nil) {
		return nil, errors.New("owner: Redis, strict decisions and write-behind go together")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if deps.Clock == nil {
		deps.Clock = clock.Real()
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	o := &Owner{cfg: cfg, deps: deps, clk: deps.Clock, logger: logger, metrics: m, thawNow: make(chan struct{}, 1), permits: newPermitTable(cfg.MaxPermitKeys)}
	if o.pm, err = newPermitMetrics(reg); err != nil {
		return nil, err
	}
	o.born = o.clk.Now()
	if o.debt, err = DebtMetric(reg); err != nil {
		return nil, err
	}
	if o.reserve, err = newReserveState(reservation.DefaultConfig(), reg); err != nil {
		return nil, err
	}
	if deps.Redis != nil {
		if o.rested, err = rested.New(cfg.Rested, o.clk); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// DebtMetric returns weir_fallback_debt_units_total registered on reg,
// or the one registered there already: the sender side (forward) counts
// recorded, reported and dropped units, the owner charged and forgiven.
func DebtMetric(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	return registerShared(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_fallback_debt_units_total",
		Help: "Units admitted by a failure policy and owed to the key's owner, by event: recorded (admitted by fallback here), reported (delivered to the owner), dropped (not kept: the table was full, beyond a full burst, or refused by the owner), charged (moved a key's TAT at its owner), forgiven (did not fit: the key was already spent at its owner).",
	}, []string{"event"}))
}

// registerShared registers c on reg, or returns the equal collector
// registered there already. A nil reg registers nothing.
func registerShared(reg prometheus.Registerer, c *prometheus.CounterVec) (*prometheus.CounterVec, error) {
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		already, ok := errors.AsType[prometheus.AlreadyRegisteredError](err)
		if !ok {
			return nil, err
		}
		return already.ExistingCollector.(*prometheus.CounterVec), nil
	}
	return c, nil
}

// Decide decides r as its group's owner: the forwarding layer found this
// node the owner. It rechecks ownership at the memory's epoch (see
// decideOwned). A request with an Op, Reserve or concurrency keys goes to
// decideGrant (permits.go) and answers in r.Grant; a plain one stays on
// decideLocal. Safe for concurrent use.
func (o *Owner) Decide(ctx context.Context, r *decide.Request, out []gcra.Result) (gcra.Result, error) {
	if plain(r) {
		return o.decideLocal(ctx, r, out)
	}
	return o.decideGrant(ctx, r, out)
}

// owns reports whether this node owns group now.
func (o *Owner) owns(group string) bool { return o.deps.Ring.Owner(group) == o.cfg.LocalName }

// MayWait reports whether deciding key of group, a group this node owns,
// may wait on another process: the limit is strict (Redis decides), or
// this owner must first load the key from Redis (it does not hold it and
// the load rule is not likely to rest it, see rested.Rule.Likely; or a
// thaw is pending). Safe for concurrent use; no I/O.
func (o *Owner) MayWait(group, key string, strict bool) bool {
	if o.deps.Redis == nil {
		return false
	}
	if strict || o.thawPending() {
		return true
	}
	if o.deps.Mem.Has(group, key) {
		return false
	}
	return !o.rested.Likely(o.deps.Mem.Epoch(), key) // a hint: the span is unknown here
}

// OwnershipChanging tells the owner that the ring is about to change: the
// groups it gains were decided elsewhere until now, so their keys are
// loaded again until their span and the rested margin have passed (see
// package rested). Call it before the new ring is visible to decisions.
// Safe for concurrent use.
func (o *Owner) OwnershipChanging() {
	if o.rested != nil {
		o.rested.Restart(o.deps.Mem.Epoch())
	}
}

// OwnershipUnsure tells the owner that the ring just installed does not
// name what this node owns (it has not joined its cluster: its seeds
// answered nothing, so it sees only itself): nothing rests until the next
// ring change (package rested). Safe for concurrent use.
func (o *Owner) OwnershipUnsure() {
	if o.rested != nil {
		o.rested.Hold()
	}
}

// Drop flushes the pending TATs of the keys for which lost is true, drops
// them from memory, and flushes again: their group moved away (a ring
// change), this node rejoined after a split, or it is leaving (lost is
// always true). A later return of ownership reloads them. Dropping
// advances the memory's epoch, so decisions already past their ownership
// check cannot re-create a dropped key (see decideLocal); the second flush
// sends what decisions admitted between the first flush and the drop. The
// first flush comes before the drop so that, when this node keeps
// ownership (a thaw, a rejoin), its next load already sees its own latest
// TATs. Both flushes share HandoffTimeout. Drops are serialised.
func (o *Owner) Drop(ctx context.Context, lost func(key string) bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.dropLocked(ctx, lost)
}

func (o *Owner) dropLocked(ctx context.Context, lost func(key string) bool) {
	start := o.clk.Now()
	fctx, cancel := context.WithTimeout(ctx, o.cfg.HandoffTimeout)
	defer cancel()
	o.markHeld(lost)
	err := o.flushKeys(fctx, lost)
	n := o.deps.Mem.DeleteFunc(lost)
	n += o.permits.drop(lost) // after the epoch moved: nothing re-creates them
	o.dropReservations(lost)  // records are not persisted: a move loses them
	o.OwnershipChanging()     // the epoch moved: a new stretch from now
	o.forgetLeases(lost)
	if err == nil {
		err = o.flushKeys(fctx, lost)
	}
	if err != nil {
		o.metrics.handoffErrors.Inc()
		o.logger.Warn("hand-off flush incomplete; the new owner may see older TATs", "err", err)
	}
	o.metrics.handedOff.Add(float64(n))
	if n > 0 {
		o.logger.Info("handed off keys", "keys", n, "took", o.clk.Since(start))
	}
}

func (o *Owner) flushKeys(ctx context.Context, match func(key string) bool) error {
	if o.deps.WriteBehind == nil {
		return nil
	}
	return o.deps.WriteBehind.FlushKeys(ctx, match)
}

// guard asks the named breaker whether a call may be made. Without
// breakers every call may.
func (o *Owner) guard(name string) (done func(error), err error) {
	if o.deps.Breakers == nil {
		return func(error) {}, nil
	}
	return o.deps.Breakers.Get(name).Allow()
}

// blame is the outcome a breaker should count for a call under ctx: the
// call is excused when the caller's own context ended, since that says
// nothing about the dependency.
func blame(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("caller ended: %w", breaker.ErrExcused)
	}
	return err
}
