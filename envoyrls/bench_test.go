package envoyrls

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	rlscommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/policy"
)

// The benchmarks below ask what `make bench-peers` asks: domain "bench",
// one descriptor {key: <k>} over 10,000 keys, hits 1, against one limit of
// 100/s burst 10 on an embedded limiter with the real clock.

const benchPolicy = `
limits:
  - {name: bench-key, domain: bench, match: [key], rate: 100/s, burst: 10}
`

const benchKeys = 10_000

func benchService(b *testing.B) *Service {
	b.Helper()
	p, err := policy.Parse("bench.yaml", []byte(benchPolicy))
	if err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	lim, err := limiter.New(limiter.DefaultConfig(), policy.Static(p), memStore(), nil, reg)
	if err != nil {
		b.Fatal(err)
	}
	svc, err := New(lim, nil, reg)
	if err != nil {
		b.Fatal(err)
	}
	return svc
}

func benchRequests() []*rlsv3.RateLimitRequest {
	reqs := make([]*rlsv3.RateLimitRequest, benchKeys)
	for i := range reqs {
		reqs[i] = &rlsv3.RateLimitRequest{Domain: "bench", HitsAddend: 1,
			Descriptors: []*rlscommon.RateLimitDescriptor{desc("key", fmt.Sprint("key-", i))}}
	}
	return reqs
}

// BenchmarkService_ShouldRateLimit calls the service in process: the
// decision and building the response, no transport.
func BenchmarkService_ShouldRateLimit(b *testing.B) {
	svc := benchService(b)
	reqs := benchRequests()
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	cpu0 := cpuTime(b)
	for b.Loop() {
		if _, err := svc.ShouldRateLimit(ctx, reqs[i%len(reqs)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric((cpuTime(b)-cpu0).Seconds()*1e6/float64(b.N), "cpu-µs/op")
}

// BenchmarkGRPC_ShouldRateLimit is one call end to end over a loopback gRPC
// connection, client and server in this process (allocs/op counts both).
func BenchmarkGRPC_ShouldRateLimit(b *testing.B) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := grpc.NewServer()
	Register(s, benchService(b))
	go s.Serve(lis) //nolint:errcheck // Stop below ends it
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		conn.Close()
		s.Stop()
	})
	client := rlsv3.NewRateLimitServiceClient(conn)
	reqs := benchRequests()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b.ReportAllocs()
	i := 0
	cpu0 := cpuTime(b)
	for b.Loop() {
		if _, err := client.ShouldRateLimit(ctx, reqs[i%len(reqs)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric((cpuTime(b)-cpu0).Seconds()*1e6/float64(b.N), "cpu-µs/op")
}

// cpuTime is the CPU time this process has used (user and system, all
// threads), which varies much less than elapsed time on a shared machine.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
