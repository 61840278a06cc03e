package server

import (
	"context"
	"errors"
	"fmt"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/limiter"
)

// Decider is what the transports need from the limiter core. Errors that
// wrap limiter.ErrInvalidRequest are the caller's fault (gRPC
// INVALID_ARGUMENT, HTTP 400); context errors mean the caller's deadline or
// cancellation; anything else means the node could not decide (gRPC
// UNAVAILABLE, HTTP 503). DecideBatch must return one decision per request,
// in order. Implementations must be safe for concurrent use.
type Decider interface {
	Decide(ctx context.Context, r limiter.Request) (limiter.Decision, error)
	DecideBatch(ctx context.Context, rs []limiter.Request) ([]limiter.Decision, error)
}

// errBrokenDecider reports a Decider that broke its contract (a batch
// answer of the wrong length): a bug on this node, not the caller's.
var errBrokenDecider = errors.New("server: decider broke its contract")

// checkRequest refuses what the transport can see is wrong before the
// limiter runs: fields this node does not know (a newer client relying on
// them would be silently misread) and a cost below 1 (absent means 1; an
// explicit 0 is refused, never read as 1).
func checkRequest(m *weirv1.DecideRequest) error {
	if m == nil {
		return fmt.Errorf("%w: missing request", limiter.ErrInvalidRequest)
	}
	if len(m.ProtoReflect().GetUnknown()) > 0 {
		return fmt.Errorf("%w: unknown fields", limiter.ErrInvalidRequest)
	}
	if m.Cost != nil && *m.Cost < 1 {
		return fmt.Errorf("%w: cost %d must be at least 1 (omit it for 1)", limiter.ErrInvalidRequest, *m.Cost)
	}
	return nil
}

// batchRequests checks a whole batch, naming the first bad request's index,
// and converts it. Nothing is decided unless every request passes.
func batchRequests(m *weirv1.DecideBatchRequest) ([]limiter.Request, error) {
	if len(m.ProtoReflect().GetUnknown()) > 0 {
		return nil, fmt.Errorf("%w: unknown fields", limiter.ErrInvalidRequest)
	}
	in := m.GetRequests()
	if len(in) > limiter.MaxBatch {
		return nil, fmt.Errorf("%w: %d requests in one batch, the most is %d",
			limiter.ErrInvalidRequest, len(in), limiter.MaxBatch)
	}
	out := make([]limiter.Request, len(in))
	for i, r := range in {
		if err := checkRequest(r); err != nil {
			return nil, fmt.Errorf("requests[%d]: %w", i, err)
		}
		out[i] = FromProto(r)
	}
	return out, nil
}

// decide checks and decides one request.
func decide(ctx context.Context, d Decider, m *weirv1.DecideRequest) (*weirv1.DecideResponse, error) {
	if err := checkRequest(m); err != nil {
		return nil, err
	}
	dec, err := d.Decide(ctx, FromProto(m))
	if err != nil {
		return nil, err
	}
	return ToProto(dec), nil
}

// decideBatch checks and decides a batch. An empty batch is answered
// without asking the Decider.
func decideBatch(ctx context.Context, d Decider, m *weirv1.DecideBatchRequest) (*weirv1.DecideBatchResponse, error) {
	decs, err := batchDecisions(ctx, d, m)
	if err != nil {
		return nil, err
	}
	out := &weirv1.DecideBatchResponse{}
	if len(decs) > 0 {
		out.Responses = ToProtoBatch(decs)
	}
	return out, nil
}

// batchDecisions checks and decides a batch: one decision per request, in
// order; none (and no call to the Decider) for an empty batch.
func batchDecisions(ctx context.Context, d Decider, m *weirv1.DecideBatchRequest) ([]limiter.Decision, error) {
	rs, err := batchRequests(m)
	if err != nil || len(rs) == 0 {
		return nil, err
	}
	decs, err := d.DecideBatch(ctx, rs)
	if err != nil {
		return nil, err
	}
	if len(decs) != len(rs) {
		return nil, fmt.Errorf("%w: %d decisions for %d requests", errBrokenDecider, len(decs), len(rs))
	}
	return decs, nil
}
