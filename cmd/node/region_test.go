package main

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	regionv1 "github.com/weirhq/weir/api/weir/region/v1"
	"github.com/weirhq/weir/tlsfiles/tlstest"
)

func regionReport(conn *grpc.ClientConn, req *regionv1.ReportRequest) (*regionv1.ReportReply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return regionv1.NewRegionClient(conn).Report(ctx, req)
}

// TestNode_regionServiceOnlyOnPeerPort: weir.region.v1 answers on the
// node-to-node listener only, and refuses a malformed report there with
// INVALID_ARGUMENT.
func TestNode_regionServiceOnlyOnPeerPort(t *testing.T) {
	n, err := launch(t, "--region", "eu", "--region-peers", "us=127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	ok := &regionv1.ReportRequest{From: "us", Reporter: "us-1#1", Home: "eu", Seq: 1}
	if _, err := regionReport(dial(t, n.grpcAddr(), nil), ok); status.Code(err) != codes.Unimplemented {
		t.Fatalf("weir.region.v1 on the public port: %v, want Unimplemented", err)
	}
	peerConn := dial(t, n.peerAddr(), nil)
	if reply, err := regionReport(peerConn, ok); err != nil || reply.GetTo() != "us" || reply.GetSeq() != 1 {
		t.Fatalf("an empty report on the peer port: %v, %v", reply, err)
	}
	bad := &regionv1.ReportRequest{From: "mars", Reporter: "x", Home: "eu", Seq: 1}
	if _, err := regionReport(peerConn, bad); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a report from an unknown region: %v, want INVALID_ARGUMENT", err)
	}
	names, err := listServices(dial(t, n.grpcAddr(), nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range names {
		if s == regionv1.Region_ServiceDesc.ServiceName {
			t.Fatalf("reflection on the public port lists %s", s)
		}
	}
}

// TestNode_regionServiceNeedsPeerMutualTLS: with peer TLS on, only a
// certificate of the cluster's CA reaches weir.region.v1.
func TestNode_regionServiceNeedsPeerMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "cluster")
	f := ca.WriteFiles(t, dir, "node", "node-a", "127.0.0.1")
	n, err := launch(t, "--peer-tls-cert", f.Cert, "--peer-tls-key", f.Key, "--peer-tls-ca", f.CA,
		"--region", "eu", "--region-peers", "us=127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	req := &regionv1.ReportRequest{From: "us", Reporter: "us-1#1", Home: "eu", Seq: 1}
	member := loadStore(t, ca.WriteFiles(t, dir, "member", "node-b"))
	if _, err := regionReport(dial(t, n.peerAddr(), member.ClientCredentials("")), req); err != nil {
		t.Fatalf("a member of the CA was refused: %v", err)
	}
	var plaintext credentials.TransportCredentials
	if _, err := regionReport(dial(t, n.peerAddr(), plaintext), req); status.Code(err) != codes.Unavailable {
		t.Fatalf("plaintext: %v, want the connection refused (Unavailable)", err)
	}
}
