package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/policy"
)

// BenchmarkGRPC_Decide is one unary Decide end to end over a loopback gRPC
// connection to an embedded limiter (built-in policy: a two-limit
// composite, 1,000 tenants). Client and server run in this process, so
// allocs/op counts both sides of the call.
func BenchmarkGRPC_Decide(b *testing.B) {
	lim, err := limiter.New(limiter.DefaultConfig(), policy.Static(policy.Builtin()),
		limiter.MemoryStore(memstore.New(memstore.DefaultConfig())), nil, prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	conn, _ := startGRPC(b, lim)
	stub := weirv1.NewRateLimiterClient(conn)
	reqs := make([]*weirv1.DecideRequest, 1000)
	for i := range reqs {
		reqs[i] = &weirv1.DecideRequest{Descriptors: map[string]string{"tenant": fmt.Sprint("t", i), "user": "u1"}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := stub.Decide(ctx, reqs[i%len(reqs)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
