package main

import (
	"flag"
	"fmt"
	"runtime"

	"google.golang.org/grpc"
)

// maxStreamWorkers bounds --grpc-stream-workers: each worker is a goroutine
// that lives as long as its server (two servers, a few KiB of stack each),
// and more workers than calls in flight buy nothing.
const maxStreamWorkers = 1024

// defaultStreamWorkers is --grpc-stream-workers's default, 8 per core Go
// schedules on (at most maxStreamWorkers). It is a multiple of the cores,
// not of the callers, because a connection's reader hands its calls to the
// workers in bursts, before any of them has run, and a call finding every
// worker busy takes a goroutine of its own: with 4 per core, under 16 to 32
// callers, two thirds of the stack growth the workers exist to save was
// still there. See docs/benchmarks.md, "Unary: stream workers".
func defaultStreamWorkers() int { return min(8*runtime.GOMAXPROCS(0), maxStreamWorkers) }

// addStreamWorkersFlag defines --grpc-stream-workers on fs, its default from
// WEIR_GRPC_STREAM_WORKERS through env.
func addStreamWorkersFlag(fs *flag.FlagSet, env *envFlags, p *int) {
	fs.IntVar(p, "grpc-stream-workers", defaultStreamWorkers(),
		"goroutines kept to serve the gRPC streams (calls) of the public and of the peer server, each; a call finding all busy gets a goroutine of its own; 0 starts a goroutine per call. The default is 8 x GOMAXPROCS")
	env.apply("grpc-stream-workers")
}

// validateStreamWorkers checks --grpc-stream-workers.
func validateStreamWorkers(n int) error {
	if n < 0 || n > maxStreamWorkers {
		return fmt.Errorf("--grpc-stream-workers %d must be between 0 (off) and %d", n, maxStreamWorkers)
	}
	return nil
}

// streamWorkerOptions serves a gRPC server's streams on n long-lived
// goroutines instead of a new goroutine per call, whose stack grows afresh
// on every call; nil for n = 0. n must pass validateStreamWorkers.
func streamWorkerOptions(n int) []grpc.ServerOption {
	if n == 0 {
		return nil
	}
	return []grpc.ServerOption{grpc.NumStreamWorkers(uint32(n))}
}
