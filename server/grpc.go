package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/grpclimit"
	"github.com/weirhq/weir/limiter"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
)

// NewGRPCService serves weir.v1.RateLimiter from d. Errors map to codes:
// limiter.ErrInvalidRequest (and unknown fields, a cost below 1, a batch
// over limiter.MaxBatch) to INVALID_ARGUMENT with the reason;
// context.DeadlineExceeded to DEADLINE_EXCEEDED; context.Canceled to
// CANCELED; anything else to UNAVAILABLE, logged at warn. On a server built
// with GRPCConfig.ServerOptions, a request larger than any valid one is
// RESOURCE_EXHAUSTED and one that does not decode (garbage bytes, invalid
// UTF-8) is INVALID_ARGUMENT, both before it is decoded or decided.
// DecideBatch answers with its responses pre-encoded: on the wire (through
// any protobuf codec) the answer is the whole DecideBatchResponse, but in
// process its Go fields are empty and its content sits in its unknown
// fields, so a caller in the same process reads it after proto.Marshal and
// proto.Unmarshal. A nil logger discards. It panics if d is nil. The service is safe for concurrent use.
func NewGRPCService(d Decider, logger *slog.Logger, opts ...ServiceOption) weirv1.RateLimiterServer {
	if d == nil {
		panic("server: NewGRPCService needs a Decider")
	}
	g := &grpcService{d: d, log: orDiscard(logger)}
	for _, o := range opts {
		o(g)
	}
	return g
}

// RegisterGRPC registers on s the weir.v1.RateLimiter service from d, the
// standard gRPC health service and server reflection (so that
// `grpcurl -plaintext HOST:PORT list` works). The health server reports
// SERVING for the whole server ("") and for weir.v1.RateLimiter; the caller
// keeps it to report NOT_SERVING when shutting down (Shutdown). opts apply
// to the service as in NewGRPCService. Call before s.Serve.
func RegisterGRPC(s reflection.GRPCServer, d Decider, logger *slog.Logger, opts ...ServiceOption) *health.Server {
	weirv1.RegisterRateLimiterServer(s, NewGRPCService(d, logger, opts...))
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(weirv1.RateLimiter_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(s, hs)
	reflection.Register(s)
	return hs
}

type grpcService struct {
	weirv1.UnimplementedRateLimiterServer
	d    Decider
	log  *slog.Logger
	topo TopologySource // nil: Topology is UNIMPLEMENTED
}

var _ weirv1.RateLimiterServer = (*grpcService)(nil)

func (g *grpcService) Decide(ctx context.Context, in *weirv1.DecideRequest) (*weirv1.DecideResponse, error) {
	if err := grpclimit.Refusal(in); err != nil {
		return nil, err
	}
	out, err := decide(ctx, g.d, in)
	if err != nil {
		return nil, g.toStatus("Decide", err)
	}
	out.RingEpoch = g.epoch()
	return out, nil
}

func (g *grpcService) DecideBatch(ctx context.Context, in *weirv1.DecideBatchRequest) (*weirv1.DecideBatchResponse, error) {
	if err := grpclimit.Refusal(in); err != nil {
		return nil, err
	}
	decs, err := batchDecisions(ctx, g.d, in)
	if err == nil {
		var out *weirv1.DecideBatchResponse
		if out, err = preEncodedBatch(decs, g.epoch()); err == nil {
			return out, nil
		}
		err = fmt.Errorf("%w: %w", errBrokenDecider, err)
	}
	return nil, g.toStatus("DecideBatch", err)
}

// toStatus maps a decision error to a gRPC status (see NewGRPCService).
func (g *grpcService) toStatus(method string, err error) error {
	switch {
	case errors.Is(err, limiter.ErrInvalidRequest):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, errNoOperator):
		return status.Error(codes.Unimplemented, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, errBrokenDecider):
		g.log.Error("decision failed", "method", method, "err", err)
		return status.Error(codes.Internal, err.Error())
	default:
		g.log.Warn("decision failed", "method", method, "err", err)
		return status.Error(codes.Unavailable, err.Error())
	}
}

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
