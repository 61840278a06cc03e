package main

import (
	"context"
	"fmt"

	ratelimitcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	guber "github.com/gubernator-io/gubernator/v2"
	"google.golang.org/grpc"
)

// The one limit every system is configured with, or asked for.
const (
	limitPerSecond = 100
	limitBurst     = 10
	// rlsDomain and rlsKey name the limit in Envoy's terms: a request
	// carries one descriptor {rlsKey: <key>} in domain rlsDomain.
	rlsDomain = "bench"
	rlsKey    = "key"
	// guberName is the gubernator limit's name (its keys are UniqueKey).
	guberName = "bench"
	// weirV1Limit is weir's limit of the same numbers over weir.v1, which
	// the routed client asks (descriptor {rlsKey: <key>}).
	weirV1Limit = "bench-v1"
)

// Weir's leasable limit, asked over RLS in domain rlsDomain with one
// descriptor {leasedEntry: <key>}: saturated by one hot key, it shows what
// a non-owner answers from leases against its owner.
const (
	leasedLimitName = "bench-leased"
	leasedEntry     = "hot"
	leasedMax       = 10
	leasedTTL       = "250ms"
)

// leasedLimit is the leasable limit's rate and burst.
var leasedLimit = limit{perSecond: 1000, burst: 100}

// decider asks one system for one decision on key. allowed is meaningful
// only when err is nil. Implementations are safe for concurrent use (they
// wrap a gRPC stub).
type decider interface {
	decide(ctx context.Context, key string) (allowed bool, err error)
}

// rlsDecider asks envoy.service.ratelimit.v3.RateLimitService, which both
// weir and envoyproxy/ratelimit serve, with one descriptor {entry: key}.
type rlsDecider struct {
	c     rlsv3.RateLimitServiceClient
	entry string
}

var _ decider = rlsDecider{}

func newRLSDecider(cc grpc.ClientConnInterface) decider {
	return rlsDecider{c: rlsv3.NewRateLimitServiceClient(cc), entry: rlsKey}
}

// newLeasedDecider asks for weir's leasable limit (descriptor leasedEntry).
func newLeasedDecider(cc grpc.ClientConnInterface) decider {
	return rlsDecider{c: rlsv3.NewRateLimitServiceClient(cc), entry: leasedEntry}
}

func (d rlsDecider) decide(ctx context.Context, key string) (bool, error) {
	resp, err := d.c.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{
		Domain: rlsDomain,
		Descriptors: []*ratelimitcommon.RateLimitDescriptor{{
			Entries: []*ratelimitcommon.RateLimitDescriptor_Entry{{Key: d.entry, Value: key}},
		}},
		HitsAddend: 1,
	})
	if err != nil {
		return false, err
	}
	switch resp.GetOverallCode() {
	case rlsv3.RateLimitResponse_OK:
		return true, nil
	case rlsv3.RateLimitResponse_OVER_LIMIT:
		return false, nil
	default:
		return false, fmt.Errorf("rls: overall code %v", resp.GetOverallCode())
	}
}

// guberDecider asks gubernator's V1.GetRateLimits for one leaky-bucket
// limit of limitPerSecond per second, burst limitBurst.
type guberDecider struct {
	c        guber.V1Client
	behavior guber.Behavior
}

var _ decider = guberDecider{}

func newGuberDecider(cc grpc.ClientConnInterface, behavior guber.Behavior) decider {
	return guberDecider{c: guber.NewV1Client(cc), behavior: behavior}
}

func (d guberDecider) decide(ctx context.Context, key string) (bool, error) {
	resp, err := d.c.GetRateLimits(ctx, &guber.GetRateLimitsReq{
		Requests: []*guber.RateLimitReq{{
			Name:      guberName,
			UniqueKey: key,
			Hits:      1,
			Limit:     limitPerSecond,
			Duration:  1000, // milliseconds
			Algorithm: guber.Algorithm_LEAKY_BUCKET,
			Behavior:  d.behavior,
			Burst:     limitBurst,
		}},
	})
	if err != nil {
		return false, err
	}
	rs := resp.GetResponses()
	if len(rs) != 1 {
		return false, fmt.Errorf("gubernator: %d responses for 1 request", len(rs))
	}
	if e := rs[0].GetError(); e != "" {
		return false, fmt.Errorf("gubernator: %s", e)
	}
	return rs[0].GetStatus() == guber.Status_UNDER_LIMIT, nil
}
