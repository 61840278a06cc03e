package main

import (
	"net"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirhq/weir/admin"
	"github.com/weirhq/weir/tlsfiles"
	"github.com/weirhq/weir/tlsfiles/tlstest"
)

// adminClient is an HTTPS client presenting cert and key (none if empty)
// and trusting servers from the CA file serverCA.
func adminClient(t *testing.T, cert, key, serverCA string) *http.Client {
	t.Helper()
	s, err := tlsfiles.Load(tlsfiles.Config{CertFile: cert, KeyFile: key, CAFile: serverCA}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: s.ClientConfig("")}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// adminStatusURL is the HTTPS URL of n's /admin/status on loopback.
func adminStatusURL(t *testing.T, n *node) string {
	t.Helper()
	_, port, err := net.SplitHostPort(n.adminAddr())
	if err != nil {
		t.Fatal(err)
	}
	return "https://127.0.0.1:" + port + admin.StatusPath
}

// With --admin-tls-ca, operator certificates come from their own CA: they
// open the admin listener and not the peer plane, and node certificates no
// longer open the admin listener.
func TestNode_adminTLSCA_separatesOperatorsFromPeers(t *testing.T) {
	dir := t.TempDir()
	cluster, operators := tlstest.NewCA(t, "cluster"), tlstest.NewCA(t, "operators")
	nodeFiles := cluster.WriteFiles(t, dir, "node", "node-a", "127.0.0.1")
	op := operators.WriteClientFiles(t, dir, "operator", "alice")
	n, err := launch(t, "--peer-tls-cert", nodeFiles.Cert, "--peer-tls-key", nodeFiles.Key, "--peer-tls-ca", nodeFiles.CA, "--admin-tls-ca", op.CA)
	if err != nil {
		t.Fatal(err)
	}
	url := adminStatusURL(t, n)

	var st admin.Status
	if code := getJSONWith(t, adminClient(t, op.Cert, op.Key, nodeFiles.CA), url, &st); code != http.StatusOK || st.Node == "" {
		t.Fatalf("operator certificate on the admin listener: %d %+v", code, st)
	}
	member := cluster.WriteFiles(t, dir, "member", "node-b")
	if _, err := adminClient(t, member.Cert, member.Key, nodeFiles.CA).Get(url); err == nil {
		t.Fatal("a node certificate opened the admin listener although --admin-tls-ca is set")
	}
	operatorAsPeer := loadStore(t, tlstest.Files{Cert: op.Cert, Key: op.Key, CA: nodeFiles.CA})
	if err := peerDecide(dial(t, n.peerAddr(), operatorAsPeer.ClientCredentials(""))); status.Code(err) != codes.Unavailable {
		t.Fatalf("operator certificate on the peer plane: %v, want the connection refused (Unavailable)", err)
	}
	if err := peerDecide(dial(t, n.peerAddr(), loadStore(t, member).ClientCredentials(""))); err != nil {
		t.Fatalf("a node certificate was refused on the peer plane: %v", err)
	}
}

// Without --admin-tls-ca, an operator certificate issued from the peer CA
// for client authentication only (as docs/security.md used to advise)
// still opens the admin listener but is not taken for a node on the peer
// plane.
func TestNode_peerPlaneRefusesClientOnlyCertificate(t *testing.T) {
	dir := t.TempDir()
	cluster := tlstest.NewCA(t, "cluster")
	nodeFiles := cluster.WriteFiles(t, dir, "node", "node-a", "127.0.0.1")
	n, err := launch(t, "--peer-tls-cert", nodeFiles.Cert, "--peer-tls-key", nodeFiles.Key, "--peer-tls-ca", nodeFiles.CA)
	if err != nil {
		t.Fatal(err)
	}
	op := cluster.WriteClientFiles(t, dir, "operator", "alice")
	if err := peerDecide(dial(t, n.peerAddr(), loadStore(t, op).ClientCredentials(""))); status.Code(err) != codes.Unavailable {
		t.Fatalf("client-only certificate on the peer plane: %v, want the connection refused (Unavailable)", err)
	}
	var st admin.Status
	if code := getJSONWith(t, adminClient(t, op.Cert, op.Key, nodeFiles.CA), adminStatusURL(t, n), &st); code != http.StatusOK {
		t.Fatalf("client-only operator certificate on the admin listener: %d", code)
	}
}

// --admin-tls-ca that is, or is issued by, the peer CA is refused at
// start, as is --admin-tls-ca without the peer TLS material.
func TestNode_adminTLSCA_refusedWhenNotApart(t *testing.T) {
	dir := t.TempDir()
	cluster := tlstest.NewCA(t, "cluster")
	nodeFiles := cluster.WriteFiles(t, dir, "node", "node-a", "127.0.0.1")
	sub := cluster.NewIntermediate(t, "operators").WriteClientFiles(t, dir, "sub", "alice")
	peerTLS := []string{"--peer-tls-cert", nodeFiles.Cert, "--peer-tls-key", nodeFiles.Key, "--peer-tls-ca", nodeFiles.CA}
	for name, args := range map[string][]string{
		"the peer CA":              append(peerTLS, "--admin-tls-ca", nodeFiles.CA),
		"issued by the peer CA":    append(peerTLS, "--admin-tls-ca", sub.CA),
		"without the peer TLS set": {"--admin-tls-ca", sub.CA},
	} {
		if _, err := launch(t, args...); err == nil || !strings.Contains(err.Error(), "--admin-tls-ca") {
			t.Errorf("%s: %v, want a refusal naming --admin-tls-ca", name, err)
		}
	}
}
