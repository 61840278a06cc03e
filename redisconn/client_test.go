package redisconn_test

import (
	"context"
	"testing"
	"time"

	"github.com/weirhq/weir/redisbackend/redistest"
	"github.com/weirhq/weir/redisconn"
	"github.com/weirhq/weir/tlsfiles/tlstest"
)

// tlsServer starts a Redis with TLS (client certificates required with
// clientAuth) and returns it with its CA's files.
func tlsServer(t *testing.T, clientAuth bool, opts ...redistest.Option) (*redistest.TLSServer, *tlstest.CA, string) {
	t.Helper()
	ca := tlstest.NewCA(t, "redis-ca")
	dir := t.TempDir()
	f := ca.WriteFiles(t, dir, "redis", "redis.test", "127.0.0.1")
	return redistest.StartTLS(t, redistest.TLSFiles{Cert: f.Cert, Key: f.Key, CA: f.CA}, clientAuth, opts...), ca, f.CA
}

func newClient(t *testing.T, cfg redisconn.Config) *redisconn.Client {
	t.Helper()
	c, err := redisconn.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ping(c *redisconn.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.Redis().Ping(ctx).Err()
}

func TestClient_mutualTLS(t *testing.T) {
	srv, ca, caFile := tlsServer(t, true)
	cfg := redisconn.DefaultConfig()
	cfg.Mode, cfg.Addrs = redisconn.Single, []string{srv.TLSAddr}
	cfg.TLS = redisconn.TLS{Enabled: true, CAFile: caFile}
	if err := ping(newClient(t, cfg)); err == nil {
		t.Fatal("a client without a certificate got through mutual TLS")
	}
	cli := ca.WriteClientFiles(t, t.TempDir(), "weir", "weir")
	cfg.TLS.CertFile, cfg.TLS.KeyFile = cli.Cert, cli.Key
	if err := ping(newClient(t, cfg)); err != nil {
		t.Fatalf("with a client certificate: %v", err)
	}
}
