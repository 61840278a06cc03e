package grpclimit

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/weirhq/weir/inflight"
)

// GatedServer is a *grpc.Server whose unary methods reserve bytes from a
// node-wide inflight.Budget before their request is read, and give them
// back once it is decoded. Register services on the GatedServer (not on
// the *grpc.Server inside) for them to be gated; everything else is the
// embedded server's.
//
// Why a reservation of the largest message, taken before the read: gRPC
// reads a message's 5-byte length prefix and then lets the sender transmit
// the whole message (its HTTP/2 stream window grows to the message size)
// before any codec or interceptor sees a byte of it, so neither can refuse
// an oversized message before it is held in memory. Until the handler asks
// for its request, a stream may buffer only StreamWindowBytes (the static
// window ServerOptions sets). So the gate, which runs where the handler
// asks for the request, reserves the most that request can be (the
// server's MaxRecvMsgBytes). A request that is already buffered (every
// ordinary call) holds its reservation for microseconds; only messages
// still arriving hold it for longer, which is what the budget bounds.
//
// Streaming methods (server reflection, health Watch) are registered
// ungated: a stream waiting for its next message would hold a reservation
// for as long as the client stays idle.
//
// Waiting calls are served round robin between connections (see
// inflight.Budget), so a connection that floods the node waits behind its
// own calls. A call that finds no room within the budget's MaxWait is answered
// RESOURCE_EXHAUSTED without its request being read; one whose deadline
// passes while it waits, DEADLINE_EXCEEDED. Safe for concurrent use.
type GatedServer struct {
	*grpc.Server
	budget *inflight.Budget
	weight int64
}

// Gate returns s gated by budget, each unary call reserving weight bytes
// (the largest message s reads: its Limits.MaxRecvMsgBytes).
func Gate(s *grpc.Server, budget *inflight.Budget, weight int) *GatedServer {
	return &GatedServer{Server: s, budget: budget, weight: int64(weight)}
}

// RegisterService registers impl under a copy of sd whose unary handlers
// take their request through the budget. sd is not modified.
func (g *GatedServer) RegisterService(sd *grpc.ServiceDesc, impl any) {
	gated := *sd
	gated.Methods = make([]grpc.MethodDesc, len(sd.Methods))
	for i, m := range sd.Methods {
		handler := m.Handler
		gated.Methods[i] = grpc.MethodDesc{
			MethodName: m.MethodName,
			Handler: func(srv any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
				return handler(srv, ctx, g.decodeWithin(ctx, dec), in)
			},
		}
	}
	g.Server.RegisterService(&gated, impl)
}

// decodeWithin returns dec run under a reservation of g.weight bytes.
func (g *GatedServer) decodeWithin(ctx context.Context, dec func(any) error) func(any) error {
	return func(v any) error {
		release, ok := g.budget.TryAcquire(g.weight)
		var err error
		if !ok { // only a call that may wait needs its connection's name
			release, err = g.budget.Acquire(ctx, caller(ctx), g.weight)
		}
		switch {
		case errors.Is(err, inflight.ErrFull):
			return status.Error(codes.ResourceExhausted, err.Error())
		case err != nil:
			return status.FromContextError(err).Err()
		}
		defer release()
		return dec(v)
	}
}

// caller names the connection a call came on, the unit the budget is fair
// between.
func caller(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}
