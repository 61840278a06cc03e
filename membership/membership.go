package membership

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
)

// ErrShutdown is returned by [Membership.Leave] after [Membership.Shutdown].
var ErrShutdown = errors.New("membership: shut down")

// defaultLeaveTimeout bounds Leave when its context has no deadline:
// memberlist would otherwise wait for the broadcast forever.
const defaultLeaveTimeout = 5 * time.Second

// Member is one alive node of the cluster as this node sees it.
type Member struct {
	Name       string // unique node name; the ring's member name
	GossipAddr string // IP:port memberlist reaches it on
	GRPCAddr   string // from its metadata; empty if it gossips none
	PeerAddr   string // node-to-node address, from its metadata; empty if it gossips none
	Region     string // from its metadata
}

// Membership is this node's view of the cluster.
//
// Concurrency: all methods are safe for concurrent use. memberlist delivers
// events on its own goroutines; they update a member table under mu and
// signal Changes without blocking, and never call back into memberlist
// (which holds its own locks while delivering them). One goroutine, the
// rejoin loop, runs from Start until Leave or Shutdown.
type Membership struct {
	list     *memberlist.Memberlist
	keyring  *memberlist.Keyring // nil without encryption; safe for concurrent use
	logger   *slog.Logger
	metrics  *metrics
	reg      prometheus.Registerer
	seeds    []string
	interval time.Duration
	changes  chan struct{}
	joined   atomic.Bool   // a join of the seeds has succeeded
	forget   time.Duration // cfg.FailedMemory
	meta     meta          // what this node gossips about itself
	delegate *delegate

	loopCtx      context.Context // ends when the rejoin loop must stop
	stopRejoin   context.CancelFunc
	wg           sync.WaitGroup // the rejoin loop and an initial join
	shutdownOnce sync.Once
	shutdownErr  error

	// life orders Leave before Shutdown: memberlist panics on a Leave
	// after Shutdown. Never held by event callbacks, since memberlist
	// delivers our own leave event from inside Leave.
	life struct {
		sync.Mutex
		shutdown bool
	}
	// mu guards the member table that event callbacks maintain, and the
	// members declared dead (name -> when), see Failed.
	mu struct {
		sync.Mutex
		members map[string]Member
		failed  map[string]time.Time
	}
}

// Start creates this node's memberlist, gossiping cfg's metadata, and joins
// cfg.Join. An unreachable seed is logged, not returned: the rejoin loop
// keeps trying every cfg.RejoinInterval. ctx bounds the initial join only;
// if it ends first, Start shuts down and returns ctx's error. logger and reg
// may be nil. Call Shutdown when done.
func Start(ctx context.Context, cfg Config, logger *slog.Logger, reg prometheus.Registerer) (*Membership, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m := &Membership{
		logger:   logger.With("node", cfg.NodeName),
		metrics:  newMetrics(),
		reg:      reg,
		seeds:    slices.Clone(cfg.Join),
		interval: cfg.RejoinInterval,
		changes:  make(chan struct{}, 1),
		forget:   cfg.FailedMemory,
	}
	m.loopCtx, m.stopRejoin = context.WithCancel(context.Background())
	m.mu.members = make(map[string]Member)
	m.mu.failed = make(map[string]time.Time)
	if err := m.metrics.register(reg); err != nil {
		m.stopRejoin()
		return nil, err
	}
	mc := cfg.memberlistConfig()
	m.meta = cfg.meta()
	m.delegate = newDelegate(m.meta.encode())
	mc.Delegate = m.delegate
	mc.Events = (*events)(m)
	mc.Logger = log.New(logWriter{m.logger}, "", 0)
	list, err := memberlist.Create(mc)
	if err != nil {
		m.stopRejoin()
		m.metrics.unregister(reg)
		return nil, fmt.Errorf("membership: starting memberlist on %s: %w", cfg.BindAddr, err)
	}
	m.list, m.keyring = list, mc.Keyring
	if err := m.initialJoin(ctx); err != nil {
		_ = m.Shutdown()
		return nil, err
	}
	m.wg.Go(m.rejoinLoop)
	return m, nil
}

// initialJoin joins the seeds once, giving up when ctx ends.
func (m *Membership) initialJoin(ctx context.Context) error {
	if len(m.seeds) == 0 {
		return nil
	}
	done := make(chan struct{})
	m.wg.Go(func() {
		defer close(done)
		m.join(m.seeds)
	})
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("membership: joining %v: %w", m.seeds, context.Cause(ctx))
	}
}

// LocalName returns this node's name.
func (m *Membership) LocalName() string {
	return m.list.LocalNode().Name
}

// GossipAddr returns the IP:port this node advertises to the cluster, with
// the actually bound port when the configured one was 0.
func (m *Membership) GossipAddr() string {
	n := m.list.LocalNode()
	return net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
}

// Members returns the alive members, this node included, sorted by name.
// Members that are suspected but not yet declared dead are included. The
// caller owns the slice.
func (m *Membership) Members() []Member {
	m.mu.Lock()
	out := make([]Member, 0, len(m.mu.members))
	for _, mem := range m.mu.members {
		out = append(out, mem)
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b Member) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// Changes is signalled after members join or leave or change metadata.
// Signals coalesce: one pending signal stands for any number of changes, so
// a receiver should read Members afresh each time. The channel is never
// closed.
func (m *Membership) Changes() <-chan struct{} {
	return m.changes
}

// Leave broadcasts that this node is leaving, so others drop it at once
// rather than after failure detection, and stops the rejoin loop. It waits
// for the broadcast until ctx's deadline (or 5s without one). Shutdown must
// still be called. It returns ErrShutdown after Shutdown. Once this node
// has left, it is no longer among its own Members.
func (m *Membership) Leave(ctx context.Context) error {
	m.stopRejoin()
	if err := ctx.Err(); err != nil {
		return err
	}
	timeout := defaultLeaveTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(d), time.Millisecond)
	}
	m.life.Lock()
	defer m.life.Unlock()
	if m.life.shutdown {
		return ErrShutdown
	}
	// Half the budget announces the leave (see Failed), the rest leaves.
	deadline := time.Now().Add(timeout)
	m.announceLeaving(timeout / 2)
	if err := m.list.Leave(max(time.Until(deadline), time.Millisecond)); err != nil {
		return fmt.Errorf("membership: leave: %w", err)
	}
	return nil
}

// Shutdown stops gossip and the rejoin loop without telling the cluster
// (call Leave first for that), and unregisters the metrics. It waits for
// this package's goroutines, at most one TCP timeout for a join in flight.
// It is idempotent.
func (m *Membership) Shutdown() error {
	m.shutdownOnce.Do(func() {
		m.stopRejoin()
		m.life.Lock()
		m.life.shutdown = true
		m.life.Unlock()
		m.shutdownErr = m.list.Shutdown()
		m.wg.Wait()
		m.metrics.unregister(m.reg)
	})
	return m.shutdownErr
}

// events receives memberlist's node events. It is a separate type so that
// its methods are not part of Membership's API.
type events Membership

var _ memberlist.EventDelegate = (*events)(nil)

func (e *events) NotifyJoin(n *memberlist.Node)   { (*Membership)(e).update(n, true) }
func (e *events) NotifyUpdate(n *memberlist.Node) { (*Membership)(e).update(n, true) }

// NotifyLeave is called both for a graceful leave and for a failure, with
// nothing in n to tell them apart; see noteFailureLocked.
func (e *events) NotifyLeave(n *memberlist.Node) { (*Membership)(e).update(n, false) }

// update records an event and signals Changes. memberlist calls it with its
// node lock held: it must not call into memberlist.
func (m *Membership) update(n *memberlist.Node, alive bool) {
	md := decodeMeta(n.Meta)
	m.mu.Lock()
	m.noteFailureLocked(n, alive)
	if alive {
		m.mu.members[n.Name] = Member{
			Name:       n.Name,
			GossipAddr: net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port))),
			GRPCAddr:   md.GRPCAddr,
			PeerAddr:   md.PeerAddr,
			Region:     md.Region,
		}
	} else {
		delete(m.mu.members, n.Name)
	}
	count := len(m.mu.members)
	m.mu.Unlock()

	m.metrics.members.Set(float64(count))
	m.metrics.changes.Inc()
	m.logger.Debug("membership changed", "member", n.Name, "alive", alive, "members", count)
	select {
	case m.changes <- struct{}{}:
	default: // a signal is already pending
	}
}
