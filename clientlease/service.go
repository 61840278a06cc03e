package clientlease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/grpclimit"
	"github.com/weirhq/weir/lease"
	"github.com/weirhq/weir/policy"
)

// Relay carries one holder's refresh to the owners of its keys: each item
// to its key's owner, one refresh per owner, and returns one answer per
// item in order. An owner that answers NotOwner or an error for an item,
// or cannot be reached, answers that item Busy (nothing granted), as a
// peer node's own refresh is applied (package leaselink). The error is
// non-nil only when no answer can be given at all (ctx ended). holder is
// the name the owners know the holder by (Request.Peer). Implementations
// must be safe for concurrent use. The node implements it in cmd/node; the
// RLQS server relays its streams through the same shape.
type Relay interface {
	Lease(ctx context.Context, holder string, r lease.Refresh) ([]lease.Answer, error)
}

// PolicySource returns the node's current policy (limiter.PolicySource and
// policy.Watcher satisfy it).
type PolicySource interface {
	Current() *policy.Policy
}

// Config bounds a Service.
type Config struct {
	// Name prefixes every holder's name: the node's name plus its boot
	// incarnation, so that a holder's name is unique across the cluster
	// and across restarts of the node.
	Name string
	// MaxHolders bounds the streams open on the node at once;
	// MaxHoldersPerConn those on one client connection. Beyond either a
	// new stream is RESOURCE_EXHAUSTED.
	MaxHolders, MaxHoldersPerConn int
	// MaxItems bounds the keys of one refresh, MaxLookups the descriptor
	// sets of one request.
	MaxItems, MaxLookups int
	// MaxKeyBytes bounds an item's key.
	MaxKeyBytes int
	// IdleTimeout ends a stream that sent nothing for this long; its
	// leases expire at their owners within one TTL.
	IdleTimeout time.Duration
	// RelayTimeout bounds one refresh's trip to the owners.
	RelayTimeout time.Duration
}

// DefaultConfig returns 10,000 holders per node and 16 per connection,
// 1,000 keys and 100 lookups per request, keys of 1 KiB, a 1 minute idle
// timeout and a 100ms relay timeout. Name must still be set.
func DefaultConfig() Config {
	return Config{MaxHolders: 10_000, MaxHoldersPerConn: 16, MaxItems: 1000, MaxLookups: 100, MaxKeyBytes: 1024,
		IdleTimeout: time.Minute, RelayTimeout: 100 * time.Millisecond}
}

// Validate reports the first problem with c, naming its field. It changes
// nothing.
func (c Config) Validate() error {
	switch {
	case c.Name == "" || len(c.Name) > 200:
		return fmt.Errorf("clientlease: config: name must be 1 to 200 bytes, not %d", len(c.Name))
	case c.MaxHolders < 1 || c.MaxHoldersPerConn < 1:
		return fmt.Errorf("clientlease: config: max holders %d and per conn %d must be at least 1", c.MaxHolders, c.MaxHoldersPerConn)
	case c.MaxItems < 1 || c.MaxLookups < 1 || c.MaxKeyBytes < 1:
		return fmt.Errorf("clientlease: config: max items %d, lookups %d and key bytes %d must be at least 1", c.MaxItems, c.MaxLookups, c.MaxKeyBytes)
	case c.IdleTimeout <= 0 || c.RelayTimeout <= 0:
		return fmt.Errorf("clientlease: config: idle timeout %s and relay timeout %s must be positive", c.IdleTimeout, c.RelayTimeout)
	}
	return nil
}

// Deps are what a Service needs from the node.
type Deps struct {
	Relay    Relay
	Policies PolicySource
	// Members is the cluster's size, for lease.CheckLeasable.
	Members func() int
	// Clock times idle streams; nil is clock.Real().
	Clock clock.Clock
}

// Service serves weir.v1.Leases. Safe for concurrent use.
type Service struct {
	weirv1.UnimplementedLeasesServer
	cfg  Config
	deps Deps
	log  *slog.Logger
	m    *metrics

	quit     chan struct{} // closed by Shutdown
	quitOnce sync.Once

	mu struct {
		sync.Mutex
		next    uint64
		holders int
		perConn map[string]int
	}
}

// Shutdown ends every stream (UNAVAILABLE: the client opens a new one,
// as a new holder, wherever its target leads) and refuses new ones, so
// that a node draining its public server is not held up by lease streams,
// which never end on their own. Units held strand at their owners for one
// TTL. Call it before the gRPC server's GracefulStop. Idempotent; a nil
// Service does nothing.
func (s *Service) Shutdown() {
	if s != nil {
		s.quitOnce.Do(func() { close(s.quit) })
	}
}

// New returns a Service, or an error naming the bad field of cfg or the
// missing dependency. A nil logger discards; a nil reg registers nothing.
func New(cfg Config, deps Deps, logger *slog.Logger, reg prometheus.Registerer) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Relay == nil || deps.Policies == nil || deps.Members == nil {
		return nil, errors.New("clientlease: New needs a relay, a policy source and a member count")
	}
	if deps.Clock == nil {
		deps.Clock = clock.Real()
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, deps: deps, log: logger, m: m, quit: make(chan struct{})}
	s.mu.perConn = make(map[string]int)
	return s, nil
}

// errShuttingDown refuses and ends streams after Shutdown.
var errShuttingDown = errors.New("clientlease: node shutting down")

// Register registers s on r (the node's public gRPC server).
func Register(r grpc.ServiceRegistrar, s *Service) { weirv1.RegisterLeasesServer(r, s) }

// Holders returns how many streams are open.
func (s *Service) Holders() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.holders
}

// admit names a new holder on connection conn, or refuses it beyond the
// bounds. release ends it.
func (s *Service) admit(conn string) (name string, release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.quit:
		return "", nil, errShuttingDown
	default:
	}
	switch {
	case s.mu.holders >= s.cfg.MaxHolders:
		return "", nil, fmt.Errorf("clientlease: %d holders open on this node, the most is %d", s.mu.holders, s.cfg.MaxHolders)
	case s.mu.perConn[conn] >= s.cfg.MaxHoldersPerConn:
		return "", nil, fmt.Errorf("clientlease: %d holders open on this connection, the most is %d", s.mu.perConn[conn], s.cfg.MaxHoldersPerConn)
	}
	s.mu.next++
	s.mu.holders++
	s.mu.perConn[conn]++
	s.m.holders.Inc()
	name = s.cfg.Name + "/h" + strconv.FormatUint(s.mu.next, 36)
	var once sync.Once
	return name, func() { once.Do(func() { s.release(conn) }) }, nil
}

func (s *Service) release(conn string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.holders--
	if s.mu.perConn[conn]--; s.mu.perConn[conn] <= 0 {
		delete(s.mu.perConn, conn)
	}
	s.m.holders.Dec()
}

// connOf names the client connection of a stream: its remote address.
func connOf(ctx context.Context) string {
	if p, ok := grpcpeer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// Hold serves one holder's stream: each request answered in order, until
// the client ends the stream, sends bad input (INVALID_ARGUMENT, nothing
// settled or granted) or stays idle past IdleTimeout.
func (s *Service) Hold(stream weirv1.Leases_HoldServer) error {
	ctx := stream.Context()
	name, release, err := s.admit(connOf(ctx))
	if errors.Is(err, errShuttingDown) {
		return status.Error(codes.Unavailable, err.Error())
	}
	if err != nil {
		return status.Error(codes.ResourceExhausted, err.Error())
	}
	defer release()
	in := make(chan *weirv1.HoldRequest)
	errc := make(chan error, 1)
	go func() { // ends when the stream does: Hold's return cancels it
		for {
			req, err := stream.Recv()
			if err != nil {
				errc <- err
				return
			}
			select {
			case in <- req:
			case <-ctx.Done():
				return
			}
		}
	}()
	idle := s.deps.Clock.NewTimer(s.cfg.IdleTimeout)
	defer idle.Stop()
	for {
		var req *weirv1.HoldRequest
		select {
		case req = <-in:
		case err := <-errc:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-idle.C():
			return status.Errorf(codes.DeadlineExceeded, "clientlease: holder idle for %s", s.cfg.IdleTimeout)
		case <-s.quit:
			return status.Error(codes.Unavailable, errShuttingDown.Error())
		case <-ctx.Done():
			return ctx.Err()
		}
		idle.Reset(s.cfg.IdleTimeout)
		if err := grpclimit.Refusal(req); err != nil { // the public server's codec refused it
			s.m.requests.WithLabelValues("invalid").Inc()
			return err
		}
		out, err := s.answer(ctx, name, req)
		if err != nil {
			s.m.requests.WithLabelValues("invalid").Inc()
			return status.Error(codes.InvalidArgument, err.Error())
		}
		s.m.requests.WithLabelValues("ok").Inc()
		if err := stream.Send(out); err != nil {
			return err
		}
	}
}
