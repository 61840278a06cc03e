package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	rlscommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/weirhq/weir/envoyimport"
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

// TestNode_answersImportedEnvoyConfig starts a node with the policy
// envoyimport makes of realistic envoyproxy/ratelimit configs and checks
// that it answers as that service would for a burst from rest: the first
// requests_per_unit calls pass and the next is over the limit (exact GCRA
// differs from fixed windows only in how quota comes back later).
func TestNode_answersImportedEnvoyConfig(t *testing.T) {
	var files []envoyimport.File
	for _, name := range []string{"mongo_cps.yaml", "edge_proxy.yaml", "istio_ingress.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "envoyimport", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, envoyimport.File{Name: name, Data: data})
	}
	res, err := envoyimport.Convert(files)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, res.Policy, 0o600); err != nil {
		t.Fatal(err)
	}
	n, _ := startNode(t, "--policy", path)
	c := rlsClient(t, n)

	const (
		ok   = rlsv3.RateLimitResponse_OK
		over = rlsv3.RateLimitResponse_OVER_LIMIT
		sec  = rlsv3.RateLimitResponse_RateLimit_SECOND
		min  = rlsv3.RateLimitResponse_RateLimit_MINUTE
		hour = rlsv3.RateLimitResponse_RateLimit_HOUR
		day  = rlsv3.RateLimitResponse_RateLimit_DAY
	)
	tests := []struct {
		name, domain string
		kv           []string
		passes       int // calls that pass before one is over the limit; -1: never over
		perUnit      uint32
		unit         rlsv3.RateLimitResponse_RateLimit_Unit
	}{
		{"per address", "edge_proxy", []string{"remote_address", "198.51.100.1"}, 50, 50, min},
		{"office NAT unlimited", "edge_proxy", []string{"remote_address", "203.0.113.7"}, -1, 0, 0},
		{"search per key", "edge_proxy", []string{"api_key", "k1", "path", "/v1/search"}, -1, 1000, hour},
		{"other paths per key", "edge_proxy", []string{"api_key", "k1", "path", "/v1/items"}, 120, 120, min},
		{"shadow user agent", "edge_proxy", []string{"user_agent", "curl"}, -1, 5, min},
		{"wildcard left out", "edge_proxy", []string{"path", "/v1/export/x"}, -1, 0, 0},
		{"product page", "ratelimit", []string{"PATH", "/productpage"}, 1, 1, min},
		{"any path", "ratelimit", []string{"PATH", "/reviews"}, -1, 100, min},
		{"flagged address", "ratelimit", []string{"header_match", "quota_exceeded", "remote_address", "198.51.100.9"}, 3, 3, hour},
		{"checkout user weekly", "ratelimit", []string{"generic_key", "checkout", "user_id", "u1"}, -1, 10, day},
		{"users database", "mongo_cps", []string{"database", "users"}, -1, 500, sec},
		{"unknown database", "mongo_cps", []string{"database", "orders"}, -1, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := max(tt.passes+1, 6)
			for i := range calls {
				resp := shouldRateLimit(t, c, tt.domain, tt.kv...)
				want := ok
				if tt.passes >= 0 && i >= tt.passes {
					want = over
				}
				st := resp.GetStatuses()[0]
				if st.GetCode() != want {
					t.Fatalf("call %d: %v, want %v", i, st, want)
				}
				if cl := st.GetCurrentLimit(); cl.GetRequestsPerUnit() != tt.perUnit || cl.GetUnit() != tt.unit {
					t.Fatalf("current_limit = %v, want %d per %v", cl, tt.perUnit, tt.unit)
				}
			}
		})
	}
}
