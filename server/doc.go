// Package server is a weir node's front door: the weir.v1.RateLimiter gRPC
// service (with the standard health service and server reflection) and the
// HTTP API (/v1/decide, /v1/decide_batch, /metrics, /healthz, /readyz). It
// translates between the wire and the limiter core and maps errors to
// status codes; it decides nothing itself.
//
// # Usage
//
//	gs := grpc.NewServer()
//	hs := server.RegisterGRPC(gs, core, logger) // core is the limiter
//	go gs.Serve(grpcListener)
//
//	api := server.NewHTTPHandler(server.DefaultHTTPConfig(), core, registry, ready, logger)
//	hsrv := &http.Server{Handler: api, ReadHeaderTimeout: 5 * time.Second}
//	go hsrv.Serve(httpListener)
//
//	// On shutdown: report NOT_SERVING first so balancers drain the node.
//	hs.Shutdown()
//	gs.GracefulStop()
//	hsrv.Shutdown(ctx)
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
// # Caller duties
//
//   - The Decider must be safe for concurrent use; both transports call it
//     from many goroutines.
//   - Serve the gRPC server and the HTTP handler, set server timeouts
//     (ReadHeaderTimeout at least) and stop them; this package starts no
//     goroutines of its own.
//   - Keep the returned health server and call its Shutdown before stopping,
//     and make ready report false until the node can decide (policy loaded,
//     ring joined).
//   - gRPC callers should set deadlines: the limiter honours them, and an
//     expired one is DEADLINE_EXCEEDED, never a guess.
package server
