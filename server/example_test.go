package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/server"
	"google.golang.org/grpc"
)

// oneLimit allows everything under one limit of burst 10 per 10 seconds.
type oneLimit struct{}

func (oneLimit) Decide(_ context.Context, r limiter.Request) (limiter.Decision, error) {
	return limiter.Decision{
		Allowed: true, Matched: true, Remaining: 9, ResetAfter: time.Second,
		Limits: []limiter.LimitDecision{{
			Name: "per-tenant", Key: "weir:{" + r.Descriptors["tenant"] + "}:per-tenant",
			Allowed: true, Remaining: 9, Burst: 10, Window: 10 * time.Second, ResetAfter: time.Second,
		}},
	}, nil
}

func (o oneLimit) DecideBatch(ctx context.Context, rs []limiter.Request) ([]limiter.Decision, error) {
	out := make([]limiter.Decision, len(rs))
	for i, r := range rs {
		out[i], _ = o.Decide(ctx, r)
	}
	return out, nil
}

func ExampleNewHTTPHandler() {
	h := server.NewHTTPHandler(server.DefaultHTTPConfig(), oneLimit{}, prometheus.NewRegistry(), nil, slog.Default())
	req := httptest.NewRequest(http.MethodPost, "/v1/decide", strings.NewReader(`{"descriptors":{"tenant":"acme"}}`))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	fmt.Println(rec.Code)
	fmt.Println(rec.Header().Get("RateLimit-Policy"))
	fmt.Println(rec.Header().Get("RateLimit"))
	// Output:
	// 200
	// "per-tenant";q=10;w=10
	// "per-tenant";r=9;t=1
}

func ExampleRegisterGRPC() {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	s := grpc.NewServer()
	health := server.RegisterGRPC(s, oneLimit{}, slog.Default())
	go s.Serve(lis)

	// ... on shutdown, tell balancers first, then drain.
	health.Shutdown()
	s.GracefulStop()
}
