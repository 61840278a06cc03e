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
			checkRLSCalls(t, c, tt.domain, tt.kv, tt.passes, tt.perUnit, tt.unit)
		})
	}
}

// rlsUnit is how long an Envoy rate limit unit lasts.
func rlsUnit(t *testing.T, u rlsv3.RateLimitResponse_RateLimit_Unit) time.Duration {
	t.Helper()
	switch u {
	case rlsv3.RateLimitResponse_RateLimit_SECOND:
		return time.Second
	case rlsv3.RateLimitResponse_RateLimit_MINUTE:
		return time.Minute
	case rlsv3.RateLimitResponse_RateLimit_HOUR:
		return time.Hour
	case rlsv3.RateLimitResponse_RateLimit_DAY:
		return 24 * time.Hour
	}
	t.Fatalf("unit %v", u)
	return 0
}

// checkRLSCalls calls until the limit (perUnit per unit, burst perUnit)
// answers OVER_LIMIT: the first passes calls must pass, and every unit that
// came back while the calls ran (one per unit/perUnit, which on a loaded
// machine a run of 120 calls can outlast) may let one more pass. With
// passes -1 it checks that six calls all pass. Every answer must name the
// limit.
func checkRLSCalls(t *testing.T, c rlsv3.RateLimitServiceClient, domain string, kv []string, passes int, perUnit uint32, unit rlsv3.RateLimitResponse_RateLimit_Unit) {
	t.Helper()
	start := time.Now()
	for i := 0; ; i++ {
		st := shouldRateLimit(t, c, domain, kv...).GetStatuses()[0]
		if cl := st.GetCurrentLimit(); cl.GetRequestsPerUnit() != perUnit || cl.GetUnit() != unit {
			t.Fatalf("current_limit = %v, want %d per %v", cl, perUnit, unit)
		}
		code := st.GetCode()
		if passes < 0 {
			if code != rlsv3.RateLimitResponse_OK {
				t.Fatalf("call %d: %v, want OK", i, st)
			}
			if i == 5 {
				return
			}
			continue
		}
		refilled := int(time.Since(start) / (rlsUnit(t, unit) / time.Duration(perUnit)))
		switch {
		case code == rlsv3.RateLimitResponse_OVER_LIMIT && i < passes:
			t.Fatalf("call %d: %v, want OK for the first %d", i, st, passes)
		case code == rlsv3.RateLimitResponse_OVER_LIMIT:
			return
		case code != rlsv3.RateLimitResponse_OK:
			t.Fatalf("call %d: %v", i, st)
		case i >= passes+refilled:
			t.Fatalf("call %d: %v, want OVER_LIMIT after %d (+%d refilled in %s)", i, st, passes, refilled, time.Since(start))
		}
	}
}
