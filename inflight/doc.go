// Package inflight bounds the bytes a node holds for requests it is still
// receiving or decoding, across all its listeners at once.
//
// Every listener already bounds one request (a gRPC message size, an HTTP
// body cap) and one connection, but many callers at once multiply those
// bounds: 200 concurrent 4 MB gRPC calls hold 800 MB before a single one
// is refused. A Budget is one node-wide pool of bytes. A listener reserves
// the most a request can take before it reads the request, and gives the
// bytes back once the request is decoded:
//
//	release, err := budget.Acquire(ctx, remoteAddr, maxRequestBytes)
//	if err != nil {
//		return err // ErrFull (RESOURCE_EXHAUSTED / 503) or ctx's error
//	}
//	msg, err := read()
//	release()
//
// A request waits for bytes at most Config.MaxWait (and never past its
// context), then gets ErrFull: a full budget answers instead of hanging.
// Waiting requests are served round robin between callers (connections),
// so one caller's flood does not queue in front of everyone else. Package grpclimit applies a Budget to gRPC
// servers (Gate); package server to HTTP bodies.
//
// A Budget is safe for concurrent use.
package inflight
