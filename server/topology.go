package server

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
)

// TopologySource publishes this node's placement for clients that route
// each request to its group's owner (see package routing). Topology returns
// the answer, or false when the node cannot publish one (its ring uses a
// hash clients cannot reproduce); Epoch is the ring epoch stamped on every
// decision, and must be cheap. Implementations must be safe for concurrent
// use.
type TopologySource interface {
	Topology(ctx context.Context) (*weirv1.TopologyResponse, bool)
	Epoch() uint64
}

// ServiceOption adds to the service NewGRPCService or RegisterGRPC builds.
type ServiceOption func(*grpcService)

// WithTopology answers the Topology RPC from src and stamps src's ring
// epoch on every Decide and DecideBatch answer. Without it Topology is
// UNIMPLEMENTED and answers carry no epoch, and clients do not route.
func WithTopology(src TopologySource) ServiceOption {
	return func(g *grpcService) { g.topo = src }
}

func (g *grpcService) Topology(ctx context.Context, in *weirv1.TopologyRequest) (*weirv1.TopologyResponse, error) {
	if g.topo == nil {
		return nil, status.Error(codes.Unimplemented, "server: this node does not publish its topology")
	}
	if len(in.ProtoReflect().GetUnknown()) > 0 {
		return nil, status.Error(codes.InvalidArgument, "server: topology: unknown fields")
	}
	resp, ok := g.topo.Topology(ctx)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "server: this node's ring cannot be published")
	}
	return resp, nil
}

// epoch is the ring epoch to stamp on answers; zero without a source.
func (g *grpcService) epoch() uint64 {
	if g.topo == nil {
		return 0
	}
	return g.topo.Epoch()
}
