package client_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/client"
	"github.com/weirhq/weir/tlsfiles/tlstest"
)

func TestClient_TLS(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "weir")
	addr := tlstest.ServeGRPC(t, ca.WriteFiles(t, dir, "node", "node", "127.0.0.1", "weir.internal"), func(s *grpc.Server) {
		weirv1.RegisterRateLimiterServer(s, newFakeServer())
	})
	mine := ca.WriteFiles(t, dir, "app", "app")
	foreign := tlstest.NewCA(t, "other").WriteFiles(t, dir, "other", "other")
	for _, tc := range []struct {
		name   string
		tls    *client.TLSConfig
		wantOK bool
	}{
		{"client certificate", &client.TLSConfig{CAFile: mine.CA, CertFile: mine.Cert, KeyFile: mine.Key}, true},
		{"server name override", &client.TLSConfig{CAFile: mine.CA, CertFile: mine.Cert, KeyFile: mine.Key, ServerName: "weir.internal"}, true},
		{"wrong server name", &client.TLSConfig{CAFile: mine.CA, CertFile: mine.Cert, KeyFile: mine.Key, ServerName: "evil.internal"}, false},
		{"no client certificate", &client.TLSConfig{CAFile: mine.CA}, false},
		{"server not from the trusted CA", &client.TLSConfig{CAFile: foreign.CA, CertFile: mine.Cert, KeyFile: mine.Key}, false},
		{"plaintext", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := client.DefaultConfig()
			cfg.Target, cfg.TLS, cfg.Timeout = addr, tc.tls, 5*time.Second
			c, err := client.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, err = c.Decide(context.Background(), desc("1"), 1)
			if (err == nil) != tc.wantOK {
				t.Fatalf("Decide error %v, want success %v", err, tc.wantOK)
			}
		})
	}
}

// TestClient_Route_TLSOnMemberConnections routes to a member that, like
// Target, takes only mutual TLS: the member connection must carry the
// client's TLS configuration, or the call would fall back to Target.
func TestClient_Route_TLSOnMemberConnections(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "weir")
	node := ca.WriteFiles(t, dir, "node", "node", "127.0.0.1")
	mine := ca.WriteFiles(t, dir, "app", "app")
	c := &cluster{}
	var addrs []string
	for range 2 {
		n := &routeNode{c: c}
		c.nodes = append(c.nodes, n)
		addrs = append(addrs, tlstest.ServeGRPC(t, node, func(s *grpc.Server) { weirv1.RegisterRateLimiterServer(s, n) }))
	}
	c.publish(5, addrs, 1) // every group on member 1
	cfg := client.DefaultConfig()
	cfg.Target, cfg.Route, cfg.Timeout = addrs[0], true, 5*time.Second
	cfg.TLS = &client.TLSConfig{CAFile: mine.CA, CertFile: mine.Cert, KeyFile: mine.Key}
	cl, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	waitEpoch(t, cl, 5)
	for i := range 10 {
		if _, err := cl.Decide(t.Context(), map[string]string{"tenant": string(rune('a' + i))}, 1); err != nil {
			t.Fatal(err)
		}
	}
	if got0, got1 := len(c.nodes[0].tenants()), len(c.nodes[1].tenants()); got0 != 0 || got1 != 10 {
		t.Errorf("target decided %d, member 1 %d; want 0 and 10 (sent over TLS to the owner)", got0, got1)
	}
}

func TestConfig_Validate_TLS(t *testing.T) {
	cfg := client.DefaultConfig()
	cfg.Target = "127.0.0.1:1"
	cfg.TLS = &client.TLSConfig{CertFile: "c.pem"}
	if err := cfg.Validate(); err == nil {
		t.Fatal("a certificate without its key was accepted")
	}
	cfg.TLS = &client.TLSConfig{CAFile: "/nonexistent/ca.pem"}
	if _, err := client.New(cfg); err == nil {
		t.Fatal("New accepted a CA file that does not exist")
	}
}
