package peer

import (
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/weirhq/weir/tlsfiles"
	"github.com/weirhq/weir/tlsfiles/tlstest"
)

// startTLSServer serves h on a free loopback port with mutual TLS from
// files until the test ends.
func startTLSServer(t *testing.T, h Handler, f tlstest.Files) string {
	t.Helper()
	store := loadTLS(t, f)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.Creds(credentials.NewTLS(store.ServerConfig(true))))
	Register(s, h)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(lis)
	}()
	t.Cleanup(func() {
		s.Stop()
		<-done
	})
	return lis.Addr().String()
}

func loadTLS(t *testing.T, f tlstest.Files) *tlsfiles.Store {
	t.Helper()
	s, err := tlsfiles.Load(tlsfiles.Config{CertFile: f.Cert, KeyFile: f.Key, CAFile: f.CA, RequireCA: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestClient_TLS_mutual checks the node-to-node plane's authentication in
// both directions: only a peer with a client certificate from the cluster
// CA is answered, and a client refuses a server whose certificate is not
// from that CA. The handler must see nothing from a refused peer.
func TestClient_TLS_mutual(t *testing.T) {
	dir := t.TempDir()
	ca, rogueCA := tlstest.NewCA(t, "cluster"), tlstest.NewCA(t, "rogue")
	good := ca.WriteFiles(t, dir, "server", "node-a", "127.0.0.1")
	h := &fakeHandler{}
	addr := startTLSServer(t, h, good)
	rogueAddr := startTLSServer(t, &fakeHandler{}, rogueCA.WriteFiles(t, dir, "rogue-server", "rogue", "127.0.0.1"))

	client := ca.WriteFiles(t, dir, "client", "node-b")
	roguePeer := rogueCA.WriteFiles(t, dir, "rogue-client", "rogue")
	roguePeer.CA = good.CA // trusts the real server; only its own certificate is wrong
	for _, tc := range []struct {
		name   string
		creds  credentials.TransportCredentials
		addr   string
		wantOK bool
	}{
		{"cluster certificate", loadTLS(t, client).ClientCredentials(""), addr, true},
		{"plaintext peer", nil, addr, false},
		{"certificate from another CA", loadTLS(t, roguePeer).ClientCredentials(""), addr, false},
		{"server from another CA", loadTLS(t, client).ClientCredentials(""), rogueAddr, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newClient(t, func(c *ClientConfig) { c.TLS, c.Timeout = tc.creds, 2*time.Second })
			_, err := c.Decide(t.Context(), tc.addr, item(1_000_000))
			if (err == nil) != tc.wantOK {
				t.Fatalf("Decide error %v, want success %v", err, tc.wantOK)
			}
		})
	}
	if got := len(h.batchSizes()); got != 1 {
		t.Fatalf("the handler answered %d batches, want only the authenticated peer's 1", got)
	}
}
