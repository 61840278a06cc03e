package peer_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"google.golang.org/grpc"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/peer"
)

// owner decides everything it is asked, allowing it.
type owner struct{}

func (owner) HandleDecide(_ context.Context, _ string, items []decide.Request) []peer.Result {
	out := make([]peer.Result, len(items))
	for i, it := range items {
		out[i] = peer.Result{
			Overall: gcra.Result{Allowed: true, Remaining: it.Limits[0].Burst - it.Cost},
			Results: []gcra.Result{{Allowed: true}},
		}
	}
	return out
}

func Example() {
	// The owner node serves the Peer service.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer()
	peer.Register(srv, owner{})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	// Another node forwards to it.
	cfg := peer.DefaultClientConfig()
	cfg.LocalName = "node-b"
	c, err := peer.NewClient(cfg, slog.Default(), nil)
	if err != nil {
		panic(err)
	}
	defer c.Close()

	res, err := c.Decide(context.Background(), lis.Addr().String(), decide.Request{
		Group:  "acme",
		Keys:   []string{"weir:{acme}:per-user:u7"},
		Limits: []gcra.Limit{{Interval: 100_000, Burst: 10}},
		Cost:   1,
		Now:    1_700_000_000_000_000,
	})
	switch {
	case err != nil:
		fmt.Println("no answer; apply the failure policy:", err)
	case res.NotOwner != "":
		fmt.Println("retry at", res.NotOwner)
	case res.Err != nil:
		fmt.Println("owner failed:", res.Err)
	default:
		fmt.Println("allowed:", res.Overall.Allowed, "remaining:", res.Overall.Remaining)
	}
	// Output: allowed: true remaining: 9
}
