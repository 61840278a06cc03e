// Package server is a weir node's front door: the weir.v1.RateLimiter gRPC
// service (with the standard health service and server reflection) and the
// HTTP API (/v1/decide, /v1/decide_batch, /v1/release, /v1/renew,
// /v1/settle, /metrics, /healthz, /readyz). It
// translates between the wire and the limiter core and maps errors to
// status codes; it decides nothing itself. With WithTopology it also
// answers the Topology RPC (this node's placement, for clients that route
// to owners; see package routing) and stamps the ring epoch on answers.
//
// # Usage
//
//	gs := grpc.NewServer(server.DefaultGRPCConfig().ServerOptions()...)
//	hs := server.RegisterGRPC(gs, core, logger) // core is the limiter
//	go gs.Serve(grpcListener)
//
//	api := server.NewHTTPHandler(server.DefaultHTTPConfig(), core, registry, ready, logger)
//	hsrv, err := server.NewHTTPServer(server.DefaultHTTPServerConfig(), api, logger, registry)
//	go hsrv.Serve(httpListener) // timeouts and the connection cap apply
//
//	// On shutdown: report NOT_SERVING first so balancers drain the node.
//	hs.Shutdown()
//	gs.GracefulStop()
//	hsrv.Shutdown(ctx)
//
// # Permits and reservations (issue 26)
//
// A DecideRequest's reserve reaches the limiter (limiter.Request.Reserve);
// a DecideResponse carries the decision's permit and reservation tokens
// and each LimitStatus its in_flight and kind ("rate" or "concurrency"),
// on gRPC, in the pre-encoded DecideBatch answer and in JSON (every field,
// "permit": "" when none). Release, Renew and Settle (gRPC, and POST
// /v1/release, /v1/renew, /v1/settle) need a Decider that is also an
// Operator (*limiter.Limiter is); otherwise they answer UNIMPLEMENTED /
// 501. A malformed or wrong-kind token is INVALID_ARGUMENT / 400, an
// unreachable owner UNAVAILABLE / 503, a token the owner does not hold an
// answer of false. Their messages are bounded on the wire: at most
// MaxOpRequestBytes (else RESOURCE_EXHAUSTED) and a token of at most
// ticket.MaxBytes, both before decoding.
//
// # What the transports check
//
// Before the limiter runs, a request is refused as invalid (gRPC
// INVALID_ARGUMENT, HTTP 400) when it carries fields this node does not
// know (a newer client's fields would otherwise be silently ignored), when
// its cost is present and below 1 (an absent cost is 1), or when a batch holds more than limiter.MaxBatch
// requests. A bad request in a batch fails the whole batch, naming its
// index, and nothing is decided. Every other check belongs to the limiter,
// whose limiter.ErrInvalidRequest errors map the same way.
//
// # Bounds
//
// GRPCConfig.ServerOptions sizes the largest message to the largest valid
// request (MaxDecideBatchRequestBytes), bounds streams per connection,
// enforces keepalive, and installs a codec that refuses a DecideRequest
// larger than any valid one (RESOURCE_EXHAUSTED) and too many descriptors
// or requests (INVALID_ARGUMENT) before decoding — and a weir.v1.Leases
// HoldRequest with more than MaxHoldEntries lookups or items, or an entry
// with too many descriptors, which clientlease answers with
// grpclimit.Refusal — and answers undecodable
// bytes with INVALID_ARGUMENT instead of INTERNAL. The codec decodes the
// two request types by hand (decode.go: a few allocations per request
// instead of protobuf-go's 15), accepting exactly what proto.Unmarshal
// accepts (differential fuzz targets check it). HTTPServerConfig bounds
// how long a client may take and how many connections are open. See
// docs/security.md (Resource bounds).
//
// # Caller duties
//
//   - The Decider must be safe for concurrent use; both transports call it
//     from many goroutines.
//   - Serve the gRPC server and the HTTP handler (with the options and
//     server above, or your own timeouts) and stop them; this package
//     starts no goroutines of its own.
//   - Keep the returned health server and call its Shutdown before stopping,
//     and make ready report false until the node can decide (policy loaded,
//     ring joined).
//   - gRPC callers should set deadlines: the limiter honours them, and an
//     expired one is DEADLINE_EXCEEDED, never a guess.
package server
