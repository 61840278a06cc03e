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
