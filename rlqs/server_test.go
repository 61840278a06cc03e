package rlqs

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/weirhq/weir/policy"
	"github.com/weirhq/weir/rlqs/rlqstest"
)

type staticPolicy struct{ p *policy.Policy }

func (s staticPolicy) Policy() *policy.Policy { return s.p }

// serve starts a Server over a real owner on a loopback gRPC listener and
// returns a connection to it.
func serve(t *testing.T, cfg Config) (*Server, *grpc.ClientConn) {
	t.Helper()
	owner, err := rlqstest.NewOwner("owner#1", func() int64 { return time.Now().UnixNano() })
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg, owner, staticPolicy{mustPolicy(t, testPolicy)}, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	Register(gs, srv)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return srv, conn
}

func TestServer_stream_tokenBucket(t *testing.T) {
	_, conn := serve(t, testConfig())
	c := rlqstest.NewClient(conn, rlqstest.FilterConfig{Domain: "edge", ReportingInterval: 200 * time.Millisecond})
	t.Cleanup(c.Close)
	acme := map[string]string{"tenant": "acme"}
	c.Request(acme) // the first request subscribes the bucket
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, recv, _ := c.Messages(); recv > 0 && c.Request(acme) {
			break // an assignment arrived and admits
		}
		if time.Now().After(deadline) {
			t.Fatalf("no admitting assignment within 10s; last error %v", c.Err())
		}
		time.Sleep(10 * time.Millisecond) // pacing a client that polls, not waiting for a condition
	}
}

func TestServer_stream_bounds(t *testing.T) {
	cfg := testConfig()
	cfg.MaxStreams = 1
	srv, conn := serve(t, cfg)
	cl := rlqsv3.NewRateLimitQuotaServiceClient(conn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, err := cl.StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Send(&rlqsv3.RateLimitQuotaUsageReports{Domain: "edge", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(map[string]string{"tenant": "a"}, 1, 0)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Recv(); err != nil { // served: the stream is open
		t.Fatal(err)
	}
	second, err := cl.StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := second.Recv(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second stream: %v, want RESOURCE_EXHAUSTED", err)
	}
	if err := first.Send(&rlqsv3.RateLimitQuotaUsageReports{Domain: ""}); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad report: %v, want INVALID_ARGUMENT", err)
	}
	for srv.Streams() != 0 {
		time.Sleep(time.Millisecond) // the server's stream goroutine ends after the status is sent
	}
}

func TestServer_Shutdown_endsStreamsAndRefusesNew(t *testing.T) {
	srv, conn := serve(t, testConfig())
	cl := rlqsv3.NewRateLimitQuotaServiceClient(conn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open, err := cl.StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := open.Send(&rlqsv3.RateLimitQuotaUsageReports{Domain: "edge", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(map[string]string{"tenant": "a"}, 1, 0)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := open.Recv(); err != nil { // served: the stream is open
		t.Fatal(err)
	}
	srv.Shutdown()
	srv.Shutdown() // idempotent
	for {
		if _, err := open.Recv(); err != nil {
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("open stream after Shutdown: %v, want UNAVAILABLE", err)
			}
			break
		}
	}
	late, err := cl.StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := late.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("stream opened after Shutdown: %v, want UNAVAILABLE", err)
	}
	var nilServer *Server
	nilServer.Shutdown() // a node without RLQS
}

// A bucket whose limit has no lease terms gets no assignment; the node
// says why once per limit, however many streams and buckets reach it.
func TestServer_noticeBucket_logsUnservableLimitsOnce(t *testing.T) {
	owner, err := rlqstest.NewOwner("owner#1", func() int64 { return time.Now().UnixNano() })
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	srv, err := New(testConfig(), owner, staticPolicy{mustPolicy(t, testPolicy)}, slog.New(slog.NewTextHandler(&buf, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	p := mustPolicy(t, testPolicy)
	for _, stream := range []string{"a", "b"} {
		sess := newSession(srv.cfg, "n1/rlqs/x/"+stream, srv.m)
		sess.notice = srv.noticeBucket
		in := &rlqsv3.RateLimitQuotaUsageReports{Domain: "edge", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
			usage(map[string]string{"user": "u1"}, 1, 0), // user: no lease terms
			usage(map[string]string{"user": "u2"}, 1, 0),
			usage(map[string]string{"ip": "10.0.0.1"}, 1, 0), // ip: lease ttl 250ms, under the minimum
			usage(map[string]string{"tenant": "acme"}, 1, 0), // tenant: served
		}}
		if _, err := sess.report(p, in, 0); err != nil {
			t.Fatal(err)
		}
	}
	out := buf.String()
	if n := strings.Count(out, "level=WARN"); n != 2 {
		t.Fatalf("%d warnings, want one for user and one for ip:\n%s", n, out)
	}
	for _, want := range []string{"limit=user", "limit=ip"} {
		if !strings.Contains(out, want) {
			t.Errorf("no warning names %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "limit=tenant") {
		t.Errorf("the served limit was warned about:\n%s", out)
	}
}
