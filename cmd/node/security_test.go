package main

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	peerv1 "github.com/weirhq/weir/api/weir/peer/v1"
	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/tlsfiles"
	"github.com/weirhq/weir/tlsfiles/tlstest"
)

// launch parses args (after loopback :0 defaults) and starts a node,
// stopped when the test ends. It makes no client: TLS tests bring their own.
func launch(t *testing.T, args ...string) (*node, error) {
	t.Helper()
	all := append([]string{"--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--peer-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}, args...)
	cfg, err := parseConfig(all, envMap(), io.Discard)
	if err != nil {
		return nil, err
	}
	n, err := start(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { n.shutdown(context.Background(), 5*time.Second) })
	return n, nil
}

func dial(t *testing.T, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func peerDecide(conn *grpc.ClientConn) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := peerv1.NewPeerClient(conn).Decide(ctx, &peerv1.DecideRequest{FromNode: "probe"})
	return err
}

// metric reads one sample line's value from the node's /metrics, "" if
// absent.
func metric(t *testing.T, client *http.Client, url, sample string) string {
	t.Helper()
	resp, err := client.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			return v
		}
	}
	return ""
}

// TestNode_peerServiceNotOnPublicPort is issue 11's first finding: the
// node-to-node service must answer only on the peer listener, and
// reflection on the public port must not list it.
func TestNode_peerServiceNotOnPublicPort(t *testing.T) {
	n, err := launch(t)
	if err != nil {
		t.Fatal(err)
	}
	public := dial(t, n.grpcAddr(), nil)
	if err := peerDecide(public); status.Code(err) != codes.Unimplemented {
		t.Fatalf("weir.peer.v1.Peer/Decide on the public port: %v, want Unimplemented", err)
	}
	if err := peerDecide(dial(t, n.peerAddr(), nil)); err != nil {
		t.Fatalf("on the peer port: %v", err)
	}
	names, err := listServices(public)
	if err != nil {
		t.Fatal(err)
	}
	if all := strings.Join(names, " "); !strings.Contains(all, "weir.v1.RateLimiter") || strings.Contains(all, "weir.peer") {
		t.Fatalf("reflection lists %v: want weir.v1.RateLimiter and no weir.peer service", names)
	}
	if _, err := listServices(dial(t, n.peerAddr(), nil)); status.Code(err) != codes.Unimplemented {
		t.Fatalf("reflection on the peer port: %v, want Unimplemented", err)
	}
}

// listServices asks conn's server reflection for its service names.
func listServices(conn *grpc.ClientConn) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		return nil, err
	}
	// Send reports io.EOF when the server has already ended the stream
	// (as an Unimplemented service does, racing the send); the status that
	// ended it comes from Recv.
	req := &reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}
	if err := stream.Send(req); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	resp, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	return names, nil
}

func TestNode_refusesExposedPlaintextPeer_startsWithInsecurePeer(t *testing.T) {
	if _, err := launch(t, "--peer-addr", "0.0.0.0:0"); err == nil || !strings.Contains(err.Error(), "--insecure-peer") {
		t.Fatalf("a plaintext peer listener on every interface started: %v", err)
	}
	n, err := launch(t, "--peer-addr", "0.0.0.0:0", "--insecure-peer")
	if err != nil {
		t.Fatal(err)
	}
	if v := metric(t, http.DefaultClient, "http://"+n.httpAddr(), `weir_insecure_listeners{listener="peer"}`); v != "1" {
		t.Fatalf(`weir_insecure_listeners{listener="peer"} = %q, want 1`, v)
	}
	safe, err := launch(t)
	if err != nil {
		t.Fatal(err)
	}
	if v := metric(t, http.DefaultClient, "http://"+safe.httpAddr(), `weir_insecure_listeners{listener="peer"}`); v != "0" {
		t.Fatalf(`on loopback weir_insecure_listeners{listener="peer"} = %q, want 0`, v)
	}
}

// TestNode_peerMutualTLS: with --peer-tls-*, the peer listener answers only
// peers with a certificate from the cluster CA.
func TestNode_peerMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "cluster")
	f := ca.WriteFiles(t, dir, "node", "node-a", "127.0.0.1")
	n, err := launch(t, "--peer-tls-cert", f.Cert, "--peer-tls-key", f.Key, "--peer-tls-ca", f.CA)
	if err != nil {
		t.Fatal(err)
	}
	member := loadStore(t, ca.WriteFiles(t, dir, "member", "node-b"))
	if err := peerDecide(dial(t, n.peerAddr(), member.ClientCredentials(""))); err != nil {
		t.Fatalf("a cluster member was refused: %v", err)
	}
	rogue := tlstest.NewCA(t, "rogue").WriteFiles(t, dir, "rogue", "rogue")
	rogue.CA = f.CA
	for name, creds := range map[string]credentials.TransportCredentials{
		"plaintext":          nil,
		"TLS without a cert": credentials.NewTLS(&tls.Config{ServerName: "127.0.0.1", RootCAs: member.ClientConfig("").RootCAs}),
		"cert of another CA": loadStore(t, rogue).ClientCredentials(""),
	} {
		if err := peerDecide(dial(t, n.peerAddr(), creds)); status.Code(err) != codes.Unavailable {
			t.Errorf("%s: %v, want the connection refused (Unavailable)", name, err)
		}
	}
}

func loadStore(t *testing.T, f tlstest.Files) *tlsfiles.Store {
	t.Helper()
	s, err := tlsfiles.Load(tlsfiles.Config{CertFile: f.Cert, KeyFile: f.Key, CAFile: f.CA}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestNode_publicTLS serves gRPC and HTTP over TLS, and with
// --tls-client-ca requires client certificates on both.
func TestNode_publicTLS(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "public")
	f := ca.WriteFiles(t, dir, "node", "weir.example", "127.0.0.1")
	n, err := launch(t, "--tls-cert", f.Cert, "--tls-key", f.Key)
	if err != nil {
		t.Fatal(err)
	}
	caOnly := loadStore(t, tlstest.Files{CA: f.CA})
	req := &weirv1.DecideRequest{Descriptors: map[string]string{"tenant": "demo", "user": "u1"}, Cost: new(int64(1))}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if r, err := weirv1.NewRateLimiterClient(dial(t, n.grpcAddr(), caOnly.ClientCredentials(""))).Decide(ctx, req); err != nil || !r.Allowed {
		t.Fatalf("decide over TLS: %v %v", r, err)
	}
	if _, err := weirv1.NewRateLimiterClient(dial(t, n.grpcAddr(), nil)).Decide(ctx, req); err == nil {
		t.Fatal("a plaintext client was answered by a TLS listener")
	}
	https := &http.Client{Transport: &http.Transport{TLSClientConfig: caOnly.ClientConfig("")}}
	if v := metric(t, https, "https://"+n.httpAddr(), `weir_insecure_listeners{listener="peer"}`); v != "0" {
		t.Fatalf("metrics over HTTPS: %q", v)
	}

	m, err := launch(t, "--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-client-ca", f.CA)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := weirv1.NewRateLimiterClient(dial(t, m.grpcAddr(), caOnly.ClientCredentials(""))).Decide(ctx, req); err == nil {
		t.Fatal("mTLS listener answered a client without a certificate")
	}
	if _, err := https.Get("https://" + m.httpAddr() + "/healthz"); err == nil {
		t.Fatal("mTLS HTTP listener answered a client without a certificate")
	}
	client := loadStore(t, ca.WriteFiles(t, dir, "client", "app"))
	if r, err := weirv1.NewRateLimiterClient(dial(t, m.grpcAddr(), client.ClientCredentials(""))).Decide(ctx, req); err != nil || !r.Allowed {
		t.Fatalf("decide over mTLS: %v %v", r, err)
	}
}

// TestNode_securedClusterForwards runs two nodes in-process with a gossip
// key file and peer mTLS: they find each other, and decisions for groups
// the other node owns are forwarded over the authenticated peer plane.
func TestNode_securedClusterForwards(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "cluster")
	keyFile, _ := writeGossipKeys(t, 2)
	secure := func(name string, extra ...string) *node {
		f := ca.WriteFiles(t, dir, name, name, "127.0.0.1")
		// The first forward to a peer also dials it and runs the TLS
		// handshake; under the race detector on a loaded machine that can
		// take longer than the 20ms default, which is not what this tests.
		n, err := launch(t, append([]string{"--node-name", name, "--gossip-addr", "127.0.0.1:0", "--gossip-key-file", keyFile, "--forward-timeout", "2s",
			"--peer-tls-cert", f.Cert, "--peer-tls-key", f.Key, "--peer-tls-ca", f.CA}, extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	a := secure("a")
	b := secure("b", "--join", a.members.GossipAddr())
	waitFor(t, 10*time.Second, func() bool { return len(a.members.Members()) == 2 && len(b.members.Members()) == 2 })
	for _, m := range b.members.Members() {
		if m.Name == "a" && m.PeerAddr != a.peerAddr() {
			t.Fatalf("b sees a's peer address as %q, want %q", m.PeerAddr, a.peerAddr())
		}
	}

	c := weirv1.NewRateLimiterClient(dial(t, b.grpcAddr(), nil))
	for i := range 20 {
		r := decide(t, c, 1, "tenant", "t"+string(rune('a'+i)), "user", "u")
		if !r.Allowed || r.Fallback != nil {
			t.Fatalf("tenant %d: %+v, want a normal admission", i, r)
		}
	}
	if v := metric(t, http.DefaultClient, "http://"+b.httpAddr(), `weir_forwards_total{result="ok"}`); v == "" || v == "0" {
		t.Fatalf(`b's weir_forwards_total{result="ok"} = %q: nothing was forwarded over the peer plane`, v)
	}
}

// TestNode_reloadGossipKeys is the SIGHUP path of a key rotation: after a
// reload that puts a new key first, a node holding only the new key joins.
// A key file that does not load before that is rejected on its own.
func TestNode_reloadGossipKeys(t *testing.T) {
	path, keys := writeGossipKeys(t, 2)
	oldKey, newKey := keys[0], keys[1]
	write := func(lines ...string) {
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(oldKey)
	a, err := launch(t, "--node-name", "a", "--gossip-addr", "127.0.0.1:0", "--gossip-key-file", path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config{security: security{GossipKeyFile: path}}
	write("not a key")
	a.reloadGossipKeys(cfg) // rejected: a keeps the old key

	write(newKey, oldKey)
	a.reloadGossipKeys(cfg)
	newOnly := filepath.Join(t.TempDir(), "new.key")
	if err := os.WriteFile(newOnly, []byte(newKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := launch(t, "--node-name", "b", "--gossip-addr", "127.0.0.1:0", "--gossip-key-file", newOnly, "--join", a.members.GossipAddr())
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool { return len(a.members.Members()) == 2 && len(b.members.Members()) == 2 })
}
