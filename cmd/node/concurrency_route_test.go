package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/redisbackend/redistest"
)

// TestRoute_concurrencyAndSettle: through three nodes, the Go client
// routing to owners acquires, releases and settles without a forward,
// and a permit taken through a plain (forwarding) client is released
// through the routing one: one bound per tenant either way.
func TestRoute_concurrencyAndSettle(t *testing.T) {
	srv := redistest.Start(t)
	policyPath := writePolicy(t, concurrencyPolicy)
	var nodes []*node
	for i := range 3 {
		args := []string{"--redis-addr", srv.Addr(), "--gossip-addr", "127.0.0.1:0", "--node-name", fmt.Sprintf("n%d", i), "--policy", policyPath}
		if i > 0 {
			args = append(args, "--join", nodes[0].members.GossipAddr())
		}
		n, _ := startNode(t, args...)
		nodes = append(nodes, n)
	}
	epoch := waitConverged(t, nodes)
	routed := newRouteClient(t, nodes[0].grpcAddr(), true, 0)
	plain := newRouteClient(t, nodes[0].grpcAddr(), false, 0)
	waitFor(t, 10*time.Second, func() bool { return routed.RouteEpoch() == epoch })

	before := forwards(t, nodes)
	const tenants = 12
	var releases []func()
	for i := range tenants {
		d := map[string]string{"tenant": fmt.Sprintf("r%d", i), "op": "export"}
		for j := range 3 {
			release, resp, err := routed.Acquire(t.Context(), d)
			if err != nil || !resp.Allowed || len(resp.Permit) == 0 {
				t.Fatalf("tenant %d acquire %d: %+v %v", i, j, resp, err)
			}
			releases = append(releases, release)
		}
		if _, resp, err := routed.Acquire(t.Context(), d); err != nil || resp.Allowed {
			t.Fatalf("tenant %d: a fourth permit: %+v %v", i, resp, err)
		}
	}
	for _, release := range releases {
		release()
	}
	for i := range tenants {
		d := map[string]string{"tenant": fmt.Sprintf("r%d", i), "op": "export"}
		release, resp, err := routed.Acquire(t.Context(), d)
		if err != nil || !resp.Allowed {
			t.Fatalf("tenant %d after releases: %+v %v", i, resp, err)
		}
		release()
	}
	settle, resp, err := routed.Reserve(t.Context(), map[string]string{"tenant": "r0", "model": "m"}, 100)
	if err != nil || !resp.Allowed || len(resp.Reservation) == 0 {
		t.Fatalf("reserve: %+v %v", resp, err)
	}
	if st, err := settle(t.Context(), 30); err != nil || !st.Settled || st.Refunded != 70 {
		t.Fatalf("settle: %+v %v, want 70 refunded", st, err)
	}
	if got := forwards(t, nodes) - before; got != 0 {
		t.Errorf("%d routed acquires, releases, reserves and settles were forwarded, want 0", got)
	}

	// A plain client's permits are forwarded to the owners; the routing
	// client releases them, and the bound is one.
	for i := range tenants {
		d := map[string]string{"tenant": fmt.Sprintf("p%d", i), "op": "export"}
		var permits [][]byte
		for range 3 {
			resp, err := plain.Decide(t.Context(), d, 1)
			if err != nil || !resp.Allowed || len(resp.Permit) == 0 {
				t.Fatalf("plain acquire for tenant %d: %+v %v", i, resp, err)
			}
			permits = append(permits, resp.Permit)
		}
		if _, resp, err := routed.Acquire(t.Context(), d); err != nil || resp.Allowed {
			t.Fatalf("tenant %d: a routed fourth permit beside three forwarded ones: %+v %v", i, resp, err)
		}
		for _, p := range permits {
			if ok, err := routed.Release(t.Context(), p); err != nil || !ok {
				t.Fatalf("routed release of a forwarded permit: %v %v", ok, err)
			}
		}
	}
	if forwards(t, nodes) == before {
		t.Fatal("the plain client's acquires were not forwarded: the test cannot tell the paths apart")
	}
}
