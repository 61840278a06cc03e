package main

import (
	"context"
	"fmt"
	"io"
	"net"

	"google.golang.org/grpc"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
)

const echoSynopsis = `echo [--addr HOST:PORT]

Serve weir.v1.RateLimiter doing no work: every Decide is answered with one
fixed allowed response, every DecideBatch with one per request. Drive it with
"weir bench --addr" and the same flags as a node to measure the ceiling that
the client, gRPC and the machine set, and report a node's figures as a share
of it in the same run. Runs until interrupted.`

func runEcho(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("echo", echoSynopsis, stderr)
	addr := fs.String("addr", "127.0.0.1:8089", "`address` to listen on")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "weir echo: %v\n", err)
		return exitError
	}
	fmt.Fprintf(stdout, "weir echo: serving on %s\n", lis.Addr())
	if err := serveEcho(ctx, lis); err != nil {
		fmt.Fprintf(stderr, "weir echo: %v\n", err)
		return exitError
	}
	return exitOK
}

// serveEcho serves an echoServer on lis until ctx ends, then stops
// gracefully.
func serveEcho(ctx context.Context, lis net.Listener) error {
	s := grpc.NewServer()
	weirv1.RegisterRateLimiterServer(s, newEchoServer())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		s.GracefulStop()
	}()
	err := s.Serve(lis)
	<-stopped
	return err
}

// echoServer answers without deciding anything. Safe for concurrent use:
// it only reads its fixed response.
type echoServer struct {
	weirv1.UnimplementedRateLimiterServer
	resp *weirv1.DecideResponse
}

func newEchoServer() *echoServer {
	return &echoServer{resp: &weirv1.DecideResponse{Allowed: true, Remaining: 1, PolicyVersion: "echo"}}
}

func (e *echoServer) Decide(context.Context, *weirv1.DecideRequest) (*weirv1.DecideResponse, error) {
	return e.resp, nil
}

func (e *echoServer) DecideBatch(_ context.Context, in *weirv1.DecideBatchRequest) (*weirv1.DecideBatchResponse, error) {
	out := &weirv1.DecideBatchResponse{Responses: make([]*weirv1.DecideResponse, len(in.GetRequests()))}
	for i := range out.Responses {
		out.Responses[i] = e.resp
	}
	return out, nil
}
