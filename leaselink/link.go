package leaselink

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
	"github.com/weirhq/weir/lease"
	"github.com/weirhq/weir/peer"
)

// Config tunes the holder side of leases on a node.
type Config struct {
	// LocalName is this node's name in the ring: a refresh of keys whose
	// group this node now owns is not sent.
	LocalName string
	// Holder tunes the holder (package lease). Its Name identifies this
	// process to owners: the node's name plus an incarnation.
	Holder lease.HolderConfig
	// Tick is how often Tick runs in Run while the holder tracks a key
	// (SweepEvery while it tracks none, until a Spend wakes it): a refresh
	// is sent within one tick of being due. Keep it well under the
	// shortest lease TTL.
	Tick time.Duration
	// SweepEvery is how often a tick also forgets idle keys (holder) and
	// folds expired leases (owner, through Deps.Grants).
	SweepEvery time.Duration
	// RPCTimeout bounds one lease refresh round trip; a refresh that takes
	// longer is abandoned (its returned units strand at the owner).
	RPCTimeout time.Duration
}

// DefaultConfig returns package lease's holder defaults, a 10ms tick, a 1s
// sweep and a 100ms refresh timeout (a reply later than that is worth
// little of a 250ms lease, which counts from the send).
func DefaultConfig() Config {
	return Config{Holder: lease.DefaultHolderConfig(), Tick: 10 * time.Millisecond, SweepEvery: time.Second, RPCTimeout: 100 * time.Millisecond}
}

// Validate reports whether c is usable. It changes nothing.
func (c Config) Validate() error {
	if c.LocalName == "" {
		return errors.New("leaselink: local name is required")
	}
	if err := c.Holder.Validate(); err != nil {
		return fmt.Errorf("leaselink: %w", err)
	}
	if c.Tick <= 0 || c.SweepEvery <= 0 || c.RPCTimeout <= 0 {
		return errors.New("leaselink: tick, sweep and RPC timeout must be positive")
	}
	return nil
}

// Routes says where owners are (forward.Routes). Safe for concurrent use.
type Routes interface {
	// Addr returns the peer address of member name, "" when unknown.
	Addr(name string) string
	// Members returns how many members this node sees, itself included.
	Members() int
}

// Grantor is this node's owner side of leases (*Grants): swept with the
// holder's, and counted in the same metrics.
type Grantor interface {
	SweepGrants()
	GrantStats() map[string]lease.GrantorStats
}

// Budgeter bounds a wait on an owner (forward.Router): how long a caller
// under ctx may wait now for the owner at addr.
type Budgeter interface {
	Budget(ctx context.Context, addr string) time.Duration
}

// Deps are what a Link works with.
type Deps struct {
	// Leaser carries refreshes to owners (peer.Client, or peertest).
	Leaser peer.Leaser
	Routes Routes
	// Grants, if set, is swept every SweepEvery and counted in the lease
	// metrics.
	Grants Grantor
	// Breakers, if set, are the peers' breakers: no probe goes to an owner
	// whose breaker is open.
	Breakers *breaker.Set
	// Clock is the holder's time base (leases are timed as durations on
	// it since New) and makes its timers; nil: clock.Real().
	Clock clock.Clock
}

// Link is a node's holder side of leases: it spends units it holds for
// keys other nodes own (Spend), and refreshes them in one batched RPC per
// owner per tick (Tick, Run). Safe for concurrent use.
//
// Concurrency: hmu guards the holder, the sweep time and the settled
// channels; requests that wait for a refresh release it while they wait.
// Probes run in their own goroutines (probes), Run in its caller's.
type Link struct {
	cfg    Config
	deps   Deps
	clk    clock.Clock
	logger *slog.Logger
	born   time.Time
	hmu    sync.Mutex // guards h, swept and settled
	h      *lease.Holder
	swept  int64 // holder time of the last sweep
	// settled, by owner, is closed when the refresh in flight to that
	// owner is answered or given up: requests on leasable keys wait on it
	// (await). Created by the first waiter.
	settled  map[string]chan struct{}
	probes   sync.WaitGroup // probes sent by probeLocked
	metrics  *metrics
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	running  atomic.Bool // Run started
	// sleeping is set while Run waits SweepEvery, not Tick, because the
	// holder tracks no key; a Spend then sends on wake (buffered 1).
	sleeping atomic.Bool
	wake     chan struct{}
}

// New returns a Link. Call Run for the refreshes.
func New(cfg Config, deps Deps, logger *slog.Logger, reg prometheus.Registerer) (*Link, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Leaser == nil || deps.Routes == nil {
		return nil, errors.New("leaselink: a leaser and routes are required")
	}
	if deps.Clock == nil {
		deps.Clock = clock.Real()
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h, err := lease.NewHolder(cfg.Holder)
	if err != nil {
		return nil, err
	}
	l := &Link{cfg: cfg, deps: deps, clk: deps.Clock, logger: logger, born: deps.Clock.Now(), h: h,
		settled: make(map[string]chan struct{}), stop: make(chan struct{}), done: make(chan struct{}), wake: make(chan struct{}, 1)}
	if l.metrics, err = newMetrics(reg, l); err != nil {
		return nil, err
	}
	return l, nil
}

// monoNow is the holder's time base: nanoseconds since New.
func (l *Link) monoNow() int64 { return int64(l.clk.Since(l.born)) }
