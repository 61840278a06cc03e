package server

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/policy"
)

// The benchmarks below decide the built-in policy (a two-limit composite:
// per-user and per-tenant) over 1,000 tenants on an embedded limiter.

const benchTenants = 1000

func benchLimiter(b *testing.B) *limiter.Limiter {
	b.Helper()
	lim, err := limiter.New(limiter.DefaultConfig(), policy.Static(policy.Builtin()),
		limiter.MemoryStore(memstore.New(memstore.DefaultConfig())), nil, prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	return lim
}

// benchStub serves d on a loopback port with the production server options
// (DefaultGRPCConfig: limits and the pre-decode codec) and returns a client.
func benchStub(b *testing.B, d Decider) weirv1.RateLimiterClient {
	b.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := grpc.NewServer(DefaultGRPCConfig().ServerOptions()...)
	RegisterGRPC(s, d, nil)
	go s.Serve(lis) //nolint:errcheck // Stop below ends it
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		conn.Close()
		s.Stop()
	})
	return weirv1.NewRateLimiterClient(conn)
}

func benchRequests(n int) []*weirv1.DecideRequest {
	reqs := make([]*weirv1.DecideRequest, n)
	for i := range reqs {
		reqs[i] = &weirv1.DecideRequest{Descriptors: map[string]string{"tenant": fmt.Sprint("t", i%benchTenants), "user": "u1"}}
	}
	return reqs
}

// perDecision reports the heap allocations and bytes of the timed loop per
// decision, decisions being b.N times perOp. It reads the runtime's
// counters around f, as testing's own allocs/op does.
func perDecision(b *testing.B, perOp int, f func()) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start, cpu0 := time.Now(), cpuTime(b)
	f()
	elapsed, cpu := time.Since(start), cpuTime(b)-cpu0
	runtime.ReadMemStats(&after)
	n := float64(b.N) * float64(perOp)
	b.ReportMetric(cpu.Seconds()*1e6/n, "cpu-µs/decision")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/n, "allocs/decision")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n, "B/decision")
	b.ReportMetric(n/elapsed.Seconds(), "decisions/s")
}

// cpuTime is the CPU time this process has used (user and system, all
// threads): on a shared machine, CPU per decision varies much less than
// time per decision.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkGRPC_Decide is one unary Decide end to end over a loopback gRPC
// connection. Client and server run in this process, so allocs/op counts
// both sides of the call.
func BenchmarkGRPC_Decide(b *testing.B) {
	stub := benchStub(b, benchLimiter(b))
	reqs := benchRequests(benchTenants)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b.ReportAllocs()
	i := 0
	perDecision(b, 1, func() {
		for b.Loop() {
			if _, err := stub.Decide(ctx, reqs[i%len(reqs)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

// BenchmarkGRPC_DecideBatch is one DecideBatch of 100 requests end to end
// over a loopback gRPC connection, both sides in this process; the
// per-decision metrics divide by the 100 items.
func BenchmarkGRPC_DecideBatch(b *testing.B) {
	const size = 100
	stub := benchStub(b, benchLimiter(b))
	all := benchRequests(benchTenants)
	batches := make([]*weirv1.DecideBatchRequest, benchTenants/size)
	for i := range batches {
		batches[i] = &weirv1.DecideBatchRequest{Requests: all[i*size : (i+1)*size]}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b.ReportAllocs()
	i := 0
	perDecision(b, size, func() {
		for b.Loop() {
			if _, err := stub.DecideBatch(ctx, batches[i%len(batches)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

// BenchmarkService_DecideBatch is the server's own part of a DecideBatch
// of 100: checking and converting the decoded request, the limiter and
// building the response, without gRPC or protobuf encoding.
func BenchmarkService_DecideBatch(b *testing.B) {
	const size = 100
	svc := NewGRPCService(benchLimiter(b), nil)
	in := &weirv1.DecideBatchRequest{Requests: benchRequests(size)}
	ctx := context.Background()
	b.ReportAllocs()
	perDecision(b, size, func() {
		for b.Loop() {
			if _, err := svc.DecideBatch(ctx, in); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkProto_DecideBatch is the protobuf part of a DecideBatch of 100
// on the server: decoding the request, by protobuf-go (each request's
// descriptors are a protobuf map, which it decodes by reflection) and by
// the server's codec (decodeBatch), and encoding the response, from
// messages built by ToProtoBatch through proto.Marshal (as the HTTP API
// does, and gRPC did before preEncodedBatch) and by the hand-written
// encoder. It shows what the codec costs per decision beside the service's
// own part (BenchmarkService_DecideBatch).
func BenchmarkProto_DecideBatch(b *testing.B) {
	const size = 100
	raw, err := proto.Marshal(&weirv1.DecideBatchRequest{Requests: benchRequests(size)})
	if err != nil {
		b.Fatal(err)
	}
	rs, err := batchRequests(&weirv1.DecideBatchRequest{Requests: benchRequests(size)})
	if err != nil {
		b.Fatal(err)
	}
	decs, err := benchLimiter(b).DecideBatch(context.Background(), rs)
	if err != nil {
		b.Fatal(err)
	}
	resp := &weirv1.DecideBatchResponse{Responses: ToProtoBatch(decs)}
	b.Run("unmarshal_request", func(b *testing.B) {
		b.ReportAllocs()
		perDecision(b, size, func() {
			for b.Loop() {
				var m weirv1.DecideBatchRequest
				if err := proto.Unmarshal(raw, &m); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("decode_request", func(b *testing.B) { // the codec's hand-written decoder
		b.ReportAllocs()
		perDecision(b, size, func() {
			for b.Loop() {
				var m weirv1.DecideBatchRequest
				if err := decodeBatch(raw, &m); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("marshal_response", func(b *testing.B) { // messages already built
		b.ReportAllocs()
		perDecision(b, size, func() {
			for b.Loop() {
				if _, err := proto.Marshal(resp); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("build_and_marshal_response", func(b *testing.B) {
		b.ReportAllocs()
		perDecision(b, size, func() {
			for b.Loop() {
				if _, err := proto.Marshal(&weirv1.DecideBatchResponse{Responses: ToProtoBatch(decs)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("encode_response", func(b *testing.B) { // what the gRPC service does
		b.ReportAllocs()
		perDecision(b, size, func() {
			for b.Loop() {
				m, err := preEncodedBatch(decs, 0)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := proto.Marshal(m); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}
