// Command weir is weir's command-line tool: it asks a node for a decision,
// checks a policy file and benchmarks a node or cluster.
//
// Usage:
//
//	weir decide [--addr HOST:PORT] -d NAME=VALUE... [--cost N] [--reserve] [--timeout D] [--json]
//	weir release|renew [--ttl D]|settle --actual N [--addr HOST:PORT] TOKEN
//	weir policy check FILE
//	weir policy import-envoy CONFIG.yaml... > policy.yaml
//	weir bench [--addr HOST:PORT] [--mode closed|open] [--workers N] [--rate R|half]
//	           [--duration D] [--warmup D] [--keys N] [--hot SHARE] [--batch N]
//	           [--desc NAME=VALUE]... [--key-desc NAME] [--cost N] [--conns N]
//	           [--timeout D] [--json]
//	weir echo [--addr HOST:PORT]
//	weir shadow [--addr HOST:PORT,...] [--since D] [--top N] [--json]
//	weir status [--addr HOST:PORT,...] [--json]
//	weir inspect [--addr HOST:PORT,...] [--json] KEY...
//
// decide and bench connect in plaintext unless given TLS flags: --tls (system
// roots), --tls-ca FILE, --tls-cert FILE --tls-key FILE (for a node started
// with --tls-client-ca) and --tls-server-name NAME.
//
// shadow, status and inspect ask the nodes' admin listeners (the node's
// --admin-addr, 127.0.0.1:8092 by default), never the public port. They take
// the same TLS flags and then speak HTTPS: a node started with --peer-tls-*
// requires a client certificate from the cluster CA there.
//
// Exit status: decide exits 0 when the request is allowed and 1 when it is
// denied; release, renew and settle exit 1 when the owner held no such
// token; policy check exits 1 for an invalid policy; every command exits 2
// on a usage error or when it cannot reach its answer.
//
// Run "weir COMMAND -h" for a command's flags.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes.
const (
	exitOK    = 0
	exitNo    = 1 // denied (decide), invalid (policy check)
	exitError = 2 // usage error, or no answer
)

const usage = `weir is the command-line tool of the weir rate limiter.

Usage:
  weir decide [flags]        ask a node whether a request may pass
  weir release PERMIT        give back a permit's slots (weir decide prints it)
  weir renew PERMIT          extend a permit's life
  weir settle --actual N RESERVATION
                             charge a reservation (decide --reserve) its real cost
  weir policy check FILE     validate a policy file
  weir policy import-envoy CONFIG.yaml...
                             convert envoyproxy/ratelimit configs to a policy
  weir bench [flags]         load-test a node and report throughput and latency
  weir echo [--addr A]       a gRPC server that answers without deciding: bench's ceiling
  weir shadow [--since D]    which keys shadow limits would deny, merged over nodes
  weir status                members, ring share, breakers, policy version per node
  weir inspect KEY...        a key's TAT, remaining, retry-after and reset (read-only)

Run "weir COMMAND -h" for a command's flags.
`

func main() {
	// Ctrl-C cancels ctx: decide gives up, bench stops early and reports.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the command in args and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitError
	}
	switch args[0] {
	case "decide":
		return runDecide(ctx, args[1:], stdout, stderr)
	case "release", "renew", "settle":
		return runOp(ctx, args[0], args[1:], stdout, stderr)
	case "policy":
		return runPolicy(args[1:], stdout, stderr)
	case "bench":
		return runBench(ctx, args[1:], stdout, stderr)
	case "echo":
		return runEcho(ctx, args[1:], stdout, stderr)
	case "shadow":
		return runShadow(ctx, args[1:], stdout, stderr)
	case "status":
		return runStatus(ctx, args[1:], stdout, stderr)
	case "inspect":
		return runInspect(ctx, args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "weir: unknown command %q\n\n%s", args[0], usage)
	return exitError
}
