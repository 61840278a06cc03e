package peer

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	peerv1 "github.com/weirhq/weir/api/weir/peer/v1"
)

func rawClient(t *testing.T, addr string) peerv1.PeerClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return peerv1.NewPeerClient(conn)
}

func TestRegister_batchInOrder(t *testing.T) {
	h := &fakeHandler{}
	rpc := rawClient(t, startServer(t, h))
	req := &peerv1.DecideRequest{FromNode: "n7"}
	for i := range 20 {
		req.Items = append(req.Items, itemToProto(item(int64(i))))
	}
	resp, err := rpc.Decide(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetResults()) != 20 {
		t.Fatalf("%d results, want 20", len(resp.GetResults()))
	}
	for i, r := range resp.GetResults() {
		if got := resultFromProto(r).Overall.TAT; got != int64(i) {
			t.Fatalf("result %d answers item %d", i, got)
		}
	}
	if h.from[0] != "n7" {
		t.Fatalf("from = %q, want n7", h.from[0])
	}
}

func TestRegister_tooManyItems(t *testing.T) {
	h := &fakeHandler{}
	rpc := rawClient(t, startServer(t, h))
	req := &peerv1.DecideRequest{Items: make([]*peerv1.Item, MaxItems+1)}
	for i := range req.Items {
		req.Items[i] = &peerv1.Item{}
	}
	_, err := rpc.Decide(t.Context(), req)
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("err = %v, want INVALID_ARGUMENT", err)
	}
	if len(h.batchSizes()) != 0 {
		t.Fatal("the handler saw an oversized request")
	}
}
