package main

import (
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/weirhq/weir/admin"
	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/tlsfiles/tlstest"
)

func TestRun_TLSFlags(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "weir")
	addr := tlstest.ServeGRPC(t, ca.WriteFiles(t, dir, "node", "node", "127.0.0.1"), func(s *grpc.Server) {
		weirv1.RegisterRateLimiterServer(s, &fakeNode{})
	})
	me := ca.WriteFiles(t, dir, "cli", "cli")
	withCert := []string{"--addr", addr, "--tls-ca", me.CA, "--tls-cert", me.Cert, "--tls-key", me.Key}

	if code, _, stderr := runCLI(t.Context(), append([]string{"decide", "-d", "user=key-2"}, withCert...)...); code != exitOK {
		t.Fatalf("decide over mTLS: exit %d, stderr %q", code, stderr)
	}
	if code, _, _ := runCLI(t.Context(), "decide", "--addr", addr, "-d", "user=key-2"); code != exitError {
		t.Fatalf("plaintext decide against a TLS node: exit %d, want %d", code, exitError)
	}
	if code, _, _ := runCLI(t.Context(), "decide", "--addr", addr, "--tls-ca", me.CA, "-d", "user=key-2"); code != exitError {
		t.Fatalf("decide without a client certificate: exit %d, want %d", code, exitError)
	}
	code, sum := runBenchJSON(t, t.Context(), append([]string{"--duration", "200ms", "--workers", "2"}, withCert...)...)
	if code != exitOK || sum.Decisions == 0 {
		t.Fatalf("bench over mTLS: exit %d, %+v", code, sum)
	}
	if code, _, stderr := runCLI(t.Context(), "decide", "--addr", addr, "--tls-cert", me.Cert, "-d", "user=key-2"); code != exitError || !strings.Contains(stderr, "go together") {
		t.Fatalf("--tls-cert without --tls-key: exit %d, stderr %q", code, stderr)
	}
}

// serveAdminMTLS serves v at path over HTTPS, requiring a client
// certificate from f.CA as a node's admin listener with --peer-tls-* does.
func serveAdminMTLS(t *testing.T, f tlstest.Files, path string, v any) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+path, func(w http.ResponseWriter, _ *http.Request) { json.NewEncoder(w).Encode(v) })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Not httptest: its StartTLS would put its own certificate first.
	srv := &http.Server{Handler: mux, TLSConfig: f.Store(t).ServerConfig(true), ErrorLog: log.New(io.Discard, "", 0)}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.ServeTLS(lis, "", "") }()
	t.Cleanup(func() { srv.Close(); <-done })
	return lis.Addr().String()
}

func TestRunStatus_adminMTLS(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "cluster")
	addr := serveAdminMTLS(t, ca.WriteFiles(t, dir, "node", "node", "127.0.0.1"), admin.StatusPath,
		admin.Status{Node: "n1", PolicyVersion: "v1", Members: []string{"n1"}})
	op := ca.WriteFiles(t, dir, "operator", "operator")

	code, stdout, stderr := runCLI(t.Context(), "status", "--addr", addr, "--tls-ca", op.CA, "--tls-cert", op.Cert, "--tls-key", op.Key, "--json")
	if code != exitOK || !strings.Contains(stdout, `"n1"`) {
		t.Fatalf("status over mTLS: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if code, _, _ := runCLI(t.Context(), "status", "--addr", "https://"+addr, "--tls-ca", op.CA, "--tls-cert", op.Cert, "--tls-key", op.Key); code != exitOK {
		t.Fatalf("status with an https:// address: exit %d", code)
	}
	if code, _, _ := runCLI(t.Context(), "status", "--addr", addr, "--tls-ca", op.CA); code != exitError {
		t.Fatalf("status without a client certificate: exit %d, want %d", code, exitError)
	}
	if code, _, _ := runCLI(t.Context(), "status", "--addr", addr); code != exitError {
		t.Fatalf("plaintext status against an HTTPS admin listener: exit %d, want %d", code, exitError)
	}
	if code, _, stderr := runCLI(t.Context(), "status", "--addr", addr, "--tls-cert", op.Cert); code != exitError || !strings.Contains(stderr, "go together") {
		t.Fatalf("--tls-cert without --tls-key: exit %d, stderr %q", code, stderr)
	}
}
