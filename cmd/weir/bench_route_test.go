package main

import (
	"context"
	"sync/atomic"
	"testing"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/server/servertest"
)

// topoNode is a fakeNode that publishes a topology.
type topoNode struct {
	*fakeNode
	topo *atomic.Pointer[weirv1.TopologyResponse]
}

func (n topoNode) Topology(context.Context, *weirv1.TopologyRequest) (*weirv1.TopologyResponse, error) {
	return n.topo.Load(), nil
}

// TestBench_route spreads keys over two fake nodes that publish a topology
// naming both: with --route, each node receives requests directly, though
// the bench is pointed at only one of them.
func TestBench_route(t *testing.T) {
	var topo atomic.Pointer[weirv1.TopologyResponse]
	a, b := &fakeNode{}, &fakeNode{}
	addrA := servertest.Serve(t, topoNode{a, &topo})
	addrB := servertest.Serve(t, topoNode{b, &topo})
	owners := make([]uint32, 64)
	for i := range owners {
		owners[i] = uint32(i % 2)
	}
	topo.Store(&weirv1.TopologyResponse{
		RingEpoch: 1, Hash: "xxhash64", Owners: owners, PolicyVersion: "v7",
		Members:    []*weirv1.Member{{Name: "a", Address: addrA}, {Name: "b", Address: addrB}},
		GroupRules: []*weirv1.GroupRule{{Match: []string{"user"}, Group: "user"}},
	})
	code, s := runBenchJSON(t, t.Context(), "--addr", addrA, "--route", "--duration", "200ms", "--keys", "64", "--workers", "4", "--conns", "2")
	if code != exitOK || s.Decisions == 0 {
		t.Fatalf("exit %d, %d decisions", code, s.Decisions)
	}
	rpcsA, _, _ := a.stats()
	rpcsB, _, _ := b.stats()
	if rpcsA == 0 || rpcsB == 0 {
		t.Errorf("node a saw %d RPCs, node b %d; want both to be reached directly", rpcsA, rpcsB)
	}
}
