package rlqs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/lease"
	"github.com/weirhq/weir/policy"
)

// Leases carries a stream's lease refreshes to its keys' owners. Lease
// sends every item of r, as the lease holder named holder, to the owner
// of its group (one refresh per owner) and returns one answer per item in
// order. An item its owner could not answer (not the owner, an error, no
// owner known) must come back as lease.Busy, with RetryAfter set when a
// retry should wait; the error is non-nil only when no answer arrived at
// all. It is called concurrently from many streams.
type Leases interface {
	Lease(ctx context.Context, holder string, r lease.Refresh) ([]lease.Answer, error)
}

// Policies gives the policy in force; *limiter.Limiter implements it.
type Policies interface {
	Policy() *policy.Policy
}

// Server implements envoy.service.rate_limit_quota.v3.RateLimitQuotaService.
// Safe for concurrent use; each stream is served by its own goroutine.
type Server struct {
	rlqsv3.UnimplementedRateLimitQuotaServiceServer
	cfg         Config
	leases      Leases
	policies    Policies
	log         *slog.Logger
	m           *metrics
	clk         clock.Clock
	born        time.Time
	incarnation string
	streams     atomic.Int64
	seq         atomic.Uint64
	quit        chan struct{} // closed by Shutdown
	noticed     sync.Map      // kind/limit -> true: unservable limits already logged
	quitOnce    sync.Once
}

var _ rlqsv3.RateLimitQuotaServiceServer = (*Server)(nil)

// Option changes how New builds a Server.
type Option func(*Server)

// WithClock sets the clock the server measures leases and assignments
// on and ticks renewals with (default clock.Real(); only its monotonic
// differences are used).
func WithClock(c clock.Clock) Option { return func(s *Server) { s.clk = c } }

// New returns a Server taking leases through l and limits from p.
// Metrics are registered on reg (nil: not registered); a nil logger
// discards. It returns an error if cfg is invalid.
func New(cfg Config, l Leases, p Policies, logger *slog.Logger, reg prometheus.Registerer, opts ...Option) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if l == nil || p == nil {
		return nil, errors.New("rlqs: leases and policies are required")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	var nonce [6]byte
	_, _ = rand.Read(nonce[:]) // never fails (crypto/rand)
	s := &Server{cfg: cfg, leases: l, policies: p, log: logger, m: m, clk: clock.Real(), incarnation: hex.EncodeToString(nonce[:]), quit: make(chan struct{})}
	for _, o := range opts {
		o(s)
	}
	s.born = s.clk.Now()
	return s, nil
}

// Register registers srv on s. Call before s.Serve.
func Register(s grpc.ServiceRegistrar, srv *Server) {
	rlqsv3.RegisterRateLimitQuotaServiceServer(s, srv)
}

// Shutdown ends every stream with UNAVAILABLE (Envoy reopens its stream,
// to this node's successor behind the same cluster address, keeping its
// assignments until their TTLs end) and refuses new ones, so that a
// draining node's public server is not held up by RLQS streams, which
// never end on their own. The units the streams hold strand at their
// owners until the leases expire. Call it before the gRPC server's
// GracefulStop. Idempotent; a nil Server does nothing.
func (s *Server) Shutdown() {
	if s != nil {
		s.quitOnce.Do(func() { close(s.quit) })
	}
}

// errShuttingDown ends streams after Shutdown.
var errShuttingDown = status.Error(codes.Unavailable, "rlqs: node shutting down")

// Streams returns how many streams are open.
func (s *Server) Streams() int { return int(s.streams.Load()) }

// mono is the server's time base: nanoseconds since New.
func (s *Server) mono() int64 { return int64(s.clk.Since(s.born)) }

type received struct {
	in  *rlqsv3.RateLimitQuotaUsageReports
	err error
}

// StreamRateLimitQuotas serves one Envoy's stream (see the package
// documentation). It ends with INVALID_ARGUMENT for a malformed report,
// RESOURCE_EXHAUSTED beyond Config.MaxStreams or MaxBuckets, and with the
// stream's own end otherwise; the units it holds then strand at the
// owners until their leases expire, since the Envoy keeps its assignments
// until their TTLs end.
func (s *Server) StreamRateLimitQuotas(stream rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasServer) error {
	select {
	case <-s.quit:
		return errShuttingDown
	default:
	}
	if n := s.streams.Add(1); n > int64(s.cfg.MaxStreams) {
		s.streams.Add(-1)
		return status.Errorf(codes.ResourceExhausted, "rlqs: %d streams open, the most is %d", n-1, s.cfg.MaxStreams)
	}
	defer s.streams.Add(-1)
	s.m.streams.Inc()
	defer s.m.streams.Dec()
	ctx := stream.Context()
	name := s.cfg.NodeName + "/rlqs/" + s.incarnation + "/" + strconv.FormatUint(s.seq.Add(1), 10)
	sess := newSession(s.cfg, name, s.m)
	sess.notice = s.noticeBucket
	defer sess.close()
	recv := make(chan received)
	go func() {
		for {
			in, err := stream.Recv()
			select {
			case recv <- received{in, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	tick := s.clk.NewTicker(s.cfg.Tick)
	defer tick.Stop()
	for {
		var acts []*rlqsv3.RateLimitQuotaResponse_BucketAction
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.quit:
			return errShuttingDown
		case r := <-recv:
			if errors.Is(r.err, io.EOF) {
				return nil
			} else if r.err != nil {
				return r.err
			}
			var err error
			if acts, err = sess.report(s.policies.Policy(), r.in, s.mono()); err != nil {
				return s.refuse(err)
			}
			s.m.reports.WithLabelValues("ok").Inc()
		case <-tick.C():
			acts = sess.tick(s.policies.Policy(), s.mono())
		}
		acts = append(acts, s.renew(ctx, sess)...)
		if len(acts) > 0 {
			if err := stream.Send(&rlqsv3.RateLimitQuotaResponse{BucketAction: acts}); err != nil {
				return err
			}
		}
	}
}

// noticeBucket logs, once per limit and server, a bucket that no token
// bucket can serve, so that an operator learns why its Envoys get no
// assignment for it (they apply their no_assignment_behavior): the
// metric weir_rlqs_buckets counts them by kind. The set it remembers
// holds at most two entries per limit of the policy.
func (s *Server) noticeBucket(r resolution) {
	var msg string
	switch r.kind {
	case kindUnservable:
		msg = "rlqs: a limit that token buckets cannot serve governs an Envoy bucket: it needs lease terms (lease: {max, ttl}) with a ttl of at least min_lease_ttl and consistency fast; its buckets get no assignment, so Envoy applies its no_assignment_behavior"
	case kindAmbiguous:
		msg = "rlqs: an Envoy bucket id reaches different limits in different entry orders; it gets no assignment, so Envoy applies its no_assignment_behavior"
	default:
		return
	}
	if _, seen := s.noticed.LoadOrStore(r.kind.String()+"/"+r.label, true); !seen {
		s.log.Warn(msg, "limit", r.label, "min_lease_ttl", s.cfg.MinLeaseTTL())
	}
}

// refuse is the status a refused report ends its stream with.
func (s *Server) refuse(err error) error {
	if errors.Is(err, ErrTooManyBuckets) {
		s.m.reports.WithLabelValues("too_many_buckets").Inc()
		return status.Error(codes.ResourceExhausted, err.Error())
	}
	s.m.reports.WithLabelValues("invalid").Inc()
	return status.Error(codes.InvalidArgument, err.Error())
}

// renew sends the stream's due lease refreshes and applies the answers.
func (s *Server) renew(ctx context.Context, sess *session) []*rlqsv3.RateLimitQuotaResponse_BucketAction {
	var acts []*rlqsv3.RateLimitQuotaResponse_BucketAction
	for _, c := range sess.calls(s.mono()) {
		sent := s.mono()
		cctx, cancel := context.WithTimeout(ctx, s.cfg.RPCTimeout)
		answers, err := s.leases.Lease(cctx, c.holder, c.refresh)
		cancel()
		if err == nil && len(answers) != len(c.refresh.Items) {
			err = fmt.Errorf("rlqs: %d lease answers for %d items", len(answers), len(c.refresh.Items))
		}
		if err != nil {
			s.log.Debug("rlqs lease call failed", "holder", c.holder, "err", err)
		}
		acts = append(acts, sess.apply(c, answers, err, sent, s.mono())...)
	}
	return acts
}
