// Package grpclimit bounds what every weir gRPC server accepts, so the
// public server (package server) and the node-to-node server (package
// peer) bound the same things the same way:
//
//   - Limits: per connection — the largest message, the calls in flight,
//     keepalive enforcement, idle connections, static flow-control windows.
//     server.GRPCConfig and peer.ServerConfig are defined as Limits.
//   - Codec and ScanFields: per request — a Check of the request's wire
//     form before it is decoded, so that a forged request of millions of
//     tiny entries is refused before it becomes millions of objects, and
//     malformed requests are INVALID_ARGUMENT, not INTERNAL (Refusal).
//   - Gate: node-wide — unary calls take their request through an
//     inflight.Budget, so that many large calls at once cannot take the
//     node's memory.
//
// A server package puts them together:
//
//	type GRPCConfig grpclimit.Limits
//	func DefaultGRPCConfig() GRPCConfig { return GRPCConfig(grpclimit.DefaultLimits(maxRequest, 256)) }
//	func (c GRPCConfig) ServerOptions() []grpc.ServerOption {
//		return grpclimit.Limits(c).ServerOptions(newCodec())
//	}
//	s := grpc.NewServer(cfg.ServerOptions()...)
//	RegisterService(grpclimit.Gate(s, budget, cfg.MaxRecvMsgBytes), ...)
//
// and its services call Refusal first. Nothing here starts a goroutine.
package grpclimit
