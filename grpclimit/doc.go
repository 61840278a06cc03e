// Package grpclimit holds the per-connection bounds every weir gRPC server
// applies — the largest message it reads, the calls in flight on one
// connection, keepalive enforcement and idle connections — so the public
// server (package server) and the node-to-node server (package peer) bound
// the same things the same way. Each of those packages keeps its own Config
// with its own defaults and minimum message size, converts it to Limits and
// adds its own codec:
//
//	func (c GRPCConfig) ServerOptions() []grpc.ServerOption {
//		return append(grpclimit.Limits(c).ServerOptions(), grpc.ForceServerCodecV2(newCodec()))
//	}
//
// It has no state and starts nothing.
package grpclimit
