package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	rlscommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// rlsClient connects Envoy's RLS client to n's public gRPC port.
func rlsClient(t *testing.T, n *node) rlsv3.RateLimitServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(n.grpcAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}

// shouldRateLimit asks for one descriptor of key, value pairs.
func shouldRateLimit(t *testing.T, c rlsv3.RateLimitServiceClient, domain string, kv ...string) *rlsv3.RateLimitResponse {
	t.Helper()
	d := &rlscommon.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlscommon.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*rlscommon.RateLimitDescriptor{d}})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestNode_servesEnvoyRLS(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	pol := "limits:\n  - {name: per-ip, domain: edge, match: [remote_address], rate: 1/h, burst: 2}\n"
	if err := os.WriteFile(path, []byte(pol), 0o600); err != nil {
		t.Fatal(err)
	}
	n, _ := startNode(t, "--policy", path)
	c := rlsClient(t, n)
	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		if got := shouldRateLimit(t, c, "edge", "remote_address", "1.2.3.4").GetOverallCode(); got != want {
			t.Fatalf("call %d: %v, want %v", i, got, want)
		}
	}
	if got := shouldRateLimit(t, c, "other", "remote_address", "1.2.3.4").GetOverallCode(); got != rlsv3.RateLimitResponse_OK {
		t.Fatalf("unknown domain: %v", got)
	}
}
