package redisconn_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/redisbackend/redistest"
	"github.com/weirhq/weir/redisconn"
	"github.com/weirhq/weir/tlsfiles"
	"github.com/weirhq/weir/tlsfiles/tlstest"
)

// tlsServer starts a Redis with TLS (client certificates required with
// clientAuth) and returns it with its CA's files.
func tlsServer(t *testing.T, clientAuth bool, opts ...redistest.Option) (*redistest.TLSServer, *tlstest.CA, string) {
	t.Helper()
	ca := tlstest.NewCA(t, "redis-ca")
	dir := t.TempDir()
	f := ca.WriteFiles(t, dir, "redis", "redis", "redis.test", "127.0.0.1")
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
	cfg.Mode, cfg.Addrs, cfg.Timeout = redisconn.Single, []string{srv.TLSAddr}, time.Second // about TLS, not latency
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

// TestClient_ReloadPassword_newConnectionsUseTheNewPassword rotates the
// password on the server and in the file: connections made before the
// reload are refused, after it accepted.
func TestClient_ReloadPassword_newConnectionsUseTheNewPassword(t *testing.T) {
	srv := redistest.Start(t, redistest.WithACL("default on nopass -@all +ping", "weir on >old-pw ~* +@all"))
	file := filepath.Join(t.TempDir(), "pw")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("old-pw\n")
	cfg := redisconn.DefaultConfig()
	cfg.Mode, cfg.Addrs, cfg.Timeout = redisconn.Single, []string{srv.Addr()}, time.Second
	cfg.Username, cfg.PasswordFile = "weir", file
	c := newClient(t, cfg)
	ctx := context.Background()
	if err := c.Redis().Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("with the first password: %v", err)
	}
	if err := c.Redis().Do(ctx, "ACL", "SETUSER", "weir", "resetpass", ">new-pw").Err(); err != nil {
		t.Fatal(err)
	}
	_ = c.Redis().Do(ctx, "CLIENT", "KILL", "USER", "weir", "SKIPME", "no").Err() // drops this connection too
	// The first call may find its pooled connection closed (EOF); the
	// next dials anew with the old password.
	var err error
	for range 3 {
		if err = c.Redis().Get(ctx, "k").Err(); err != nil && strings.Contains(err.Error(), "WRONGPASS") {
			break
		}
	}
	if err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("reconnecting with the old password: %v, want WRONGPASS", err)
	}
	write("")
	if err := c.ReloadPassword(); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("empty file: %v", err)
	}
	write("  new-pw\n")
	if err := c.ReloadPassword(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Redis().Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("after the reload: %q, %v", v, err)
	}
}

func TestNew_fileErrorsNameTheFileNotItsContent(t *testing.T) {
	dir := t.TempDir()
	cfg := redisconn.DefaultConfig()
	cfg.Mode, cfg.Addrs = redisconn.Single, []string{"127.0.0.1:1"}
	cfg.PasswordFile = filepath.Join(dir, "missing")
	if _, err := redisconn.New(cfg, nil); err == nil || !strings.Contains(err.Error(), cfg.PasswordFile) {
		t.Fatalf("missing password file: %v", err)
	}
	cfg.PasswordFile = ""
	cfg.TLS = redisconn.TLS{Enabled: true, CAFile: filepath.Join(dir, "ca.crt")}
	if err := os.WriteFile(cfg.TLS.CAFile, []byte("not pem, and secret-ish"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := redisconn.New(cfg, nil)
	if err == nil || strings.Contains(err.Error(), "secret-ish") {
		t.Fatalf("bad CA file: %v", err)
	}
	if _, err := redisconn.New(redisconn.Config{}, nil); err == nil {
		t.Fatal("New accepted the zero Config")
	}
}

// TestClient_TLS_verifiesTheServer: a server whose certificate is from
// another CA, or for another name, is refused; --redis-tls-server-name
// names the one to expect.
func TestClient_TLS_verifiesTheServer(t *testing.T) {
	srv, _, caFile := tlsServer(t, false)
	other := tlstest.NewCA(t, "other").WriteFiles(t, t.TempDir(), "x", "x")
	cfg := redisconn.DefaultConfig()
	cfg.Mode, cfg.Addrs, cfg.Timeout = redisconn.Single, []string{srv.TLSAddr}, time.Second
	for _, tc := range []struct {
		tls  redisconn.TLS
		ok   bool
		want string
	}{
		{redisconn.TLS{Enabled: true, CAFile: caFile}, true, ""},
		{redisconn.TLS{Enabled: true, CAFile: caFile, ServerName: "redis.test"}, true, ""},
		{redisconn.TLS{Enabled: true, CAFile: caFile, ServerName: "elsewhere.test"}, false, "elsewhere.test"},
		{redisconn.TLS{Enabled: true, CAFile: other.CA}, false, "unknown authority"},
		{redisconn.TLS{Enabled: true}, false, "unknown authority"}, // system roots
	} {
		cfg.TLS = tc.tls
		err := ping(newClient(t, cfg))
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: ping = %v, want ok=%v (%q)", tc.tls, err, tc.ok, tc.want)
		}
	}
}

// TestClient_Run_followsRotatedCA replaces the server's certificate and
// the CA file with ones from a new CA: connections fail until Run has
// reloaded the CA file, then succeed, with no new client.
func TestClient_Run_followsRotatedCA(t *testing.T) {
	srv, _, caFile := tlsServer(t, false)
	cfg := redisconn.DefaultConfig()
	cfg.Mode, cfg.Addrs, cfg.Timeout = redisconn.Single, []string{srv.TLSAddr}, time.Second
	cfg.TLS = redisconn.TLS{Enabled: true, CAFile: caFile}
	c := newClient(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if err := ping(c); err != nil {
		t.Fatal(err)
	}
	// The same file names, a new CA (tlsServer's files are redis.*).
	tlstest.NewCA(t, "rotated-ca").WriteFiles(t, filepath.Dir(caFile), "redis", "redis", "redis.test", "127.0.0.1")
	srv.Restart() // serves the new certificate; the client's pooled connection is gone
	deadline := time.Now().Add(3 * tlsfilesPoll)
	for ping(c) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("no connection within %s of the CA rotation", 3*tlsfilesPoll)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition, not waiting for an outcome
	}
}

// tlsfilesPoll is how often the client's TLS files are polled.
const tlsfilesPoll = tlsfiles.DefaultPollInterval
