package envoyrls

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"

	rlscommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/policy"
)

// Input bounds; a request outside them gets INVALID_ARGUMENT.
const (
	MaxDescriptors = limiter.MaxDescriptors     // descriptors in one request
	MaxEntries     = limiter.MaxDescriptors     // entries in one descriptor
	MaxBytes       = limiter.MaxDescriptorBytes // a domain, entry key or value
)

// Decider is what the service needs from the limiter core; *limiter.Limiter
// implements it. Implementations must be safe for concurrent use.
type Decider interface {
	Policy() *policy.Policy
	DecideMatches(ctx context.Context, p *policy.Policy, ms []policy.Match, cost int64) (limiter.Decision, error)
}

var _ Decider = (*limiter.Limiter)(nil)

// Service implements envoy.service.ratelimit.v3.RateLimitService. Safe for
// concurrent use.
type Service struct {
	rlsv3.UnimplementedRateLimitServiceServer
	d       Decider
	log     *slog.Logger
	metrics *metrics
}

var _ rlsv3.RateLimitServiceServer = (*Service)(nil)

// New returns a Service deciding with d. Metrics are registered on reg (nil:
// not registered); a nil logger discards.
func New(d Decider, logger *slog.Logger, reg prometheus.Registerer) (*Service, error) {
	if d == nil {
		return nil, errors.New("envoyrls: a Decider is required")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &Service{d: d, log: logger, metrics: m}, nil
}

// Register registers svc on s. Call before s.Serve.
func Register(s grpc.ServiceRegistrar, svc *Service) { rlsv3.RegisterRateLimitServiceServer(s, svc) }

// descriptor is one request descriptor, checked and resolved.
type descriptor struct {
	match     policy.Match
	matched   bool // a limit is to be decided
	unlimited bool // an unlimited or replaced limit answers: nothing is decided
	cost      int64
	decision  limiter.Decision // set once decided, when matched
}

// ShouldRateLimit decides every descriptor of in (see the package
// documentation). Malformed input gets INVALID_ARGUMENT and consumes
// nothing; a decision that fails for another reason gets UNAVAILABLE, and
// Envoy then applies its own failure_mode_deny.
func (s *Service) ShouldRateLimit(ctx context.Context, in *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if err := check(in); err != nil {
		s.metrics.invalid.Inc()
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	p := s.d.Policy()
	if !p.HasDomain(in.GetDomain()) {
		s.metrics.unknownDomain.Inc()
		s.metrics.ok.Inc()
		return allOK(len(in.GetDescriptors())), nil
	}
	ds := resolve(p, in)
	for i := range ds {
		d := &ds[i]
		if !d.matched {
			continue
		}
		dec, err := s.d.DecideMatches(ctx, p, []policy.Match{d.match}, d.cost)
		if err != nil {
			return nil, s.toStatus(err)
		}
		d.decision = dec
	}
	out := respond(ds)
	if out.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
		s.metrics.overLimit.Inc()
	} else {
		s.metrics.ok.Inc()
	}
	return out, nil
}

// check refuses what cannot be decided: no domain, no descriptors, empty
// descriptors, oversized input, a cost over limiter.MaxCost and negative
// hits, which weir cannot refund.
func check(in *rlsv3.RateLimitRequest) error {
	switch n := len(in.GetDescriptors()); {
	case in.GetDomain() == "":
		return errors.New("envoyrls: the domain is empty")
	case len(in.GetDomain()) > MaxBytes:
		return fmt.Errorf("envoyrls: the domain is longer than %d bytes", MaxBytes)
	case n == 0:
		return errors.New("envoyrls: no descriptors")
	case n > MaxDescriptors:
		return fmt.Errorf("envoyrls: %d descriptors, the most is %d", n, MaxDescriptors)
	case int64(in.GetHitsAddend()) > limiter.MaxCost:
		return fmt.Errorf("envoyrls: hits_addend %d exceeds %d", in.GetHitsAddend(), limiter.MaxCost)
	}
	for i, d := range in.GetDescriptors() {
		if err := checkDescriptor(d); err != nil {
			return fmt.Errorf("envoyrls: descriptors[%d]: %w", i, err)
		}
	}
	return nil
}

func checkDescriptor(d *rlscommon.RateLimitDescriptor) error {
	switch n := len(d.GetEntries()); {
	case n == 0:
		return errors.New("no entries")
	case n > MaxEntries:
		return fmt.Errorf("%d entries, the most is %d", n, MaxEntries)
	case d.GetIsNegativeHits():
		return errors.New("is_negative_hits is not supported: weir does not refund")
	case d.GetHitsAddend() != nil && d.GetHitsAddend().GetValue() > limiter.MaxCost:
		return fmt.Errorf("hits_addend %d exceeds %d", d.GetHitsAddend().GetValue(), limiter.MaxCost)
	}
	for j, e := range d.GetEntries() {
		if e.GetKey() == "" || len(e.GetKey()) > MaxBytes || len(e.GetValue()) > MaxBytes {
			return fmt.Errorf("entries[%d]: key must be 1 to %d bytes and value at most %d", j, MaxBytes, MaxBytes)
		}
	}
	return nil
}

// resolve finds each descriptor's limit and cost, then switches off the
// limits that another matched limit replaces. A concurrency limit's match
// is skipped (package doc).
func resolve(p *policy.Policy, in *rlsv3.RateLimitRequest) []descriptor {
	ds := make([]descriptor, len(in.GetDescriptors()))
	replaced := map[string]bool{}
	for i, d := range in.GetDescriptors() {
		entries := make([]policy.EnvoyEntry, len(d.GetEntries()))
		for j, e := range d.GetEntries() {
			entries[j] = policy.EnvoyEntry{Key: e.GetKey(), Value: e.GetValue()}
		}
		ds[i].match, ds[i].matched = p.ResolveEnvoy(in.GetDomain(), entries)
		if ds[i].matched && ds[i].match.Limit.Def().Concurrency {
			// Not evaluated: Envoy cannot release a permit, so one taken
			// here would hold its slot until its ttl. The descriptor is
			// answered as one no limit answers.
			ds[i].matched = false
		}
		ds[i].cost = int64(in.GetHitsAddend())
		if h := d.GetHitsAddend(); h != nil {
			ds[i].cost = int64(h.GetValue())
		}
		if ds[i].cost == 0 { // Envoy defines a hits_addend of 0 as 1
			ds[i].cost = 1
		}
		if ds[i].matched {
			for _, r := range ds[i].match.Limit.Envoy.Replaces {
				replaced[r] = true
			}
		}
	}
	for i := range ds {
		if ds[i].matched && (replaced[ds[i].match.Limit.Name] || ds[i].match.Limit.Envoy.Unlimited) {
			ds[i].matched, ds[i].unlimited = false, true
		}
	}
	return ds
}

// allOK answers n descriptors of an unknown domain.
func allOK(n int) *rlsv3.RateLimitResponse {
	out := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, n)}
	for i := range out.Statuses {
		out.Statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
	}
	return out
}

func (s *Service) toStatus(err error) error {
	switch {
	case errors.Is(err, limiter.ErrInvalidRequest):
		s.metrics.invalid.Inc()
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		s.metrics.failed.Inc()
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		s.metrics.failed.Inc()
		return status.Error(codes.Canceled, err.Error())
	}
	s.metrics.failed.Inc()
	s.log.Warn("envoy rls decision failed", "err", err)
	return status.Error(codes.Unavailable, err.Error())
}

// unlimitedRemaining is limit_remaining for an unlimited descriptor, as
// envoyproxy/ratelimit reports it.
const unlimitedRemaining = math.MaxUint32
