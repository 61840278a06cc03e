package peer

import (
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/weirhq/weir/tlsfiles/tlstest"
)

// TestClient_TLS_mutual checks the node-to-node plane's authentication in
// both directions: only a peer with a client certificate from the cluster
// CA is answered, and a client refuses a server whose certificate is not
// from that CA. The handler must see nothing from a refused peer.
func TestClient_TLS_mutual(t *testing.T) {
	dir := t.TempDir()
	ca, rogueCA := tlstest.NewCA(t, "cluster"), tlstest.NewCA(t, "rogue")
	good := ca.WriteFiles(t, dir, "server", "node-a", "127.0.0.1")
	h := &fakeHandler{}
	addr := tlstest.ServeGRPC(t, good, func(s *grpc.Server) { Register(s, h) })
	rogueAddr := tlstest.ServeGRPC(t, rogueCA.WriteFiles(t, dir, "rogue-server", "rogue", "127.0.0.1"), func(s *grpc.Server) { Register(s, &fakeHandler{}) })

	client := ca.WriteFiles(t, dir, "client", "node-b")
	roguePeer := rogueCA.WriteFiles(t, dir, "rogue-client", "rogue")
	roguePeer.CA = good.CA // trusts the real server; only its own certificate is wrong
	for _, tc := range []struct {
		name   string
		creds  credentials.TransportCredentials
		addr   string
		wantOK bool
	}{
		{"cluster certificate", client.Store(t).ClientCredentials(""), addr, true},
		{"plaintext peer", nil, addr, false},
		{"certificate from another CA", roguePeer.Store(t).ClientCredentials(""), addr, false},
		{"server from another CA", client.Store(t).ClientCredentials(""), rogueAddr, false},
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
