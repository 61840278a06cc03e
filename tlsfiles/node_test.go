package tlsfiles_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirhq/weir/tlsfiles"
	"github.com/weirhq/weir/tlsfiles/tlstest"
)

// A node listener answers a node certificate (valid both ways) and refuses
// a client-only certificate from the same CA, such as an operator's; a
// plain mutual-TLS listener accepts both.
func TestStore_NodeServerConfig_refusesClientOnlyCertificate(t *testing.T) {
	ca, dir := tlstest.NewCA(t, "cluster"), t.TempDir()
	srv := load(t, ca.WriteFiles(t, dir, "srv", "node-a", "127.0.0.1"))
	node := load(t, ca.WriteFiles(t, dir, "node", "node-b"))
	operator := load(t, ca.WriteClientFiles(t, dir, "op", "operator"))

	if srvErr, cliErr, _ := exchange(t, srv.NodeServerConfig(), node.ClientConfig("127.0.0.1")); srvErr != nil || cliErr != nil {
		t.Fatalf("node certificate: server %v, client %v", srvErr, cliErr)
	}
	srvErr, cliErr, _ := exchange(t, srv.NodeServerConfig(), operator.ClientConfig("127.0.0.1"))
	if srvErr == nil || cliErr == nil {
		t.Fatalf("client-only certificate: server %v, client %v; want it refused", srvErr, cliErr)
	}
	if !strings.Contains(srvErr.Error(), `"operator"`) {
		t.Fatalf("server error %q does not name the certificate", srvErr)
	}
	if srvErr, cliErr, _ := exchange(t, srv.ServerConfig(true), operator.ClientConfig("127.0.0.1")); srvErr != nil || cliErr != nil {
		t.Fatalf("client-only certificate on a plain mTLS listener: server %v, client %v", srvErr, cliErr)
	}
}

func TestCheckSeparateCAs(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, pems ...[]byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, bytes.Join(pems, nil), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	peerCA, opCA := tlstest.NewCA(t, "peer"), tlstest.NewCA(t, "operators")
	peer := write("peer.crt", peerCA.PEM)
	for name, tc := range map[string]struct {
		file string
		ok   bool
	}{
		"a CA of its own":        {write("op.crt", opCA.PEM), true},
		"the peer CA itself":     {write("same.crt", peerCA.PEM), false},
		"a bundle holding it":    {write("bundle.crt", opCA.PEM, peerCA.PEM), false},
		"issued by the peer CA":  {write("inter.crt", peerCA.NewIntermediate(t, "sub").PEM), false},
		"issued by its own CA":   {write("own-inter.crt", opCA.NewIntermediate(t, "own-sub").PEM), true},
		"a file that is missing": {filepath.Join(dir, "missing.crt"), false},
	} {
		err := tlsfiles.CheckSeparateCAs(tc.file, peer)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok %v", name, err, tc.ok)
		}
	}
}
