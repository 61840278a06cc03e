package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	peerv1 "github.com/weirhq/weir/api/weir/peer/v1"
)

func TestParseConfig_bounds(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cfg, err := parseConfig([]string{"--max-keys", "100"}, env(map[string]string{"WEIR_MAX_KEYS": "5", "WEIR_PEER_MAX_SKEW": "3s"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Bounds.MaxKeys != 100 || cfg.Bounds.PeerMaxSkew != 3*time.Second || cfg.Bounds.HTTPMaxConns != 4096 {
		t.Fatalf("bounds %+v: want the flag over the environment, the environment over the default", cfg.Bounds)
	}
	if mk, fk := memstoreConfig(cfg.Bounds).MaxKeys, limiterConfig(cfg.Bounds).FallbackMaxKeys; mk != 100 || fk != 100 {
		t.Fatalf("--max-keys 100 caps owner memory at %d and the local-fallback state at %d", mk, fk)
	}
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, map[string]string{"WEIR_MAX_KEYS": "lots"}, `WEIR_MAX_KEYS="lots"`},
		{nil, map[string]string{"WEIR_PEER_MAX_SKEW": "2"}, `WEIR_PEER_MAX_SKEW="2"`},
		{[]string{"--max-keys", "-1"}, nil, "--max-keys -1 must not be negative"},
		{[]string{"--peer-max-skew", "0s"}, nil, "--peer-max-skew 0s must be positive"},
		{[]string{"--http-max-conns", "0"}, nil, "--http-max-conns 0 must be positive"},
		{[]string{"--max-inflight-bytes", "1000"}, nil, "--max-inflight-bytes 1000 must hold at least one largest gRPC message"},
	} {
		_, err := parseConfig(tc.args, env(tc.env), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: err = %v, want %q", tc.args, tc.env, err, tc.want)
		}
	}
}

// The node's peer service validates forwarded work: a forward stamped ten
// years ahead is refused and leaves the key as it was, while the public
// API still decides it from a full burst.
func TestNode_peerForgedNowRefused(t *testing.T) {
	n, c := startNode(t)
	conn, err := grpc.NewClient(n.peerAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	forged := &peerv1.Item{
		Group: "acme", Keys: []string{"weir:{acme}:per-user:acme:u1"},
		Limits: []*peerv1.Limit{{IntervalUs: 1 << 40, Burst: 1}}, Cost: 1,
		NowUs: time.Now().Add(10 * 365 * 24 * time.Hour).UnixMicro(),
	}
	resp, err := peerv1.NewPeerClient(conn).Decide(ctx, &peerv1.DecideRequest{FromNode: "x", Items: []*peerv1.Item{forged}})
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.GetResults()[0]; !strings.Contains(r.GetError(), "refused") || r.GetOverall() != nil {
		t.Fatalf("forged forward answered %v", r)
	}
	// acme is on the built-in pro tier: per-user 50/s burst 20.
	if r := decide(t, c, 1, "tenant", "acme", "user", "u1"); !r.Allowed || r.Remaining != 19 {
		t.Fatalf("after the forged forward: %v; want a full burst of 20 less one", r)
	}
}

// With --max-keys, a node full of live keys falls back by policy for new
// keys (reason memory_full) and keeps deciding the keys it holds.
func TestNode_maxKeysFallsBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	const slow = "limits: [{name: per-user, match: [tenant, user], group: tenant, rate: 1/h, burst: 10}]\n"
	if err := os.WriteFile(path, []byte(slow), 0o600); err != nil {
		t.Fatal(err)
	}
	_, c := startNode(t, "--max-keys", "1", "--policy", path)
	if r := decide(t, c, 1, "tenant", "acme", "user", "u1"); !r.Allowed || r.Fallback != nil {
		t.Fatalf("first key: %v", r)
	}
	// u1's key stays live for an hour: no room for u2's.
	r := decide(t, c, 1, "tenant", "acme", "user", "u2")
	if r.Fallback == nil || r.Fallback.Reason != "memory_full" {
		t.Fatalf("a second key: %v; want a memory_full fallback", r)
	}
	if r := decide(t, c, 1, "tenant", "acme", "user", "u1"); r.Fallback != nil || r.Remaining != 8 {
		t.Fatalf("the held key when full: %v; want a normal decision", r)
	}
}
