package client_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/client"
	"github.com/weirhq/weir/routing"
	"github.com/weirhq/weir/server/servertest"
)

// cluster is a set of fake nodes that publish one shared topology and
// stamp its epoch on their answers. Each records the tenants it decided.
type cluster struct {
	topo  atomic.Pointer[weirv1.TopologyResponse]
	nodes []*routeNode
}

type routeNode struct {
	weirv1.UnimplementedRateLimiterServer
	c    *cluster
	mu   sync.Mutex
	seen []string // tenants, in arrival order
	rpcs int
}

func (n *routeNode) Topology(context.Context, *weirv1.TopologyRequest) (*weirv1.TopologyResponse, error) {
	return n.c.topo.Load(), nil
}

func (n *routeNode) Decide(_ context.Context, r *weirv1.DecideRequest) (*weirv1.DecideResponse, error) {
	n.record(r)
	return &weirv1.DecideResponse{Allowed: true, PolicyVersion: "v1", RingEpoch: n.c.topo.Load().GetRingEpoch()}, nil
}

func (n *routeNode) DecideBatch(_ context.Context, b *weirv1.DecideBatchRequest) (*weirv1.DecideBatchResponse, error) {
	out := &weirv1.DecideBatchResponse{RingEpoch: n.c.topo.Load().GetRingEpoch()}
	for _, r := range b.GetRequests() {
		n.record(r)
		out.Responses = append(out.Responses, &weirv1.DecideResponse{Allowed: true, PolicyVersion: "v1"})
	}
	return out, nil
}

func (n *routeNode) record(r *weirv1.DecideRequest) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.seen = append(n.seen, r.GetDescriptors()["tenant"])
}

func (n *routeNode) tenants() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.seen...)
}

// newCluster serves size fake nodes and returns their addresses.
func newCluster(t *testing.T, size int) (*cluster, []string) {
	c := &cluster{}
	addrs := make([]string, size)
	for i := range size {
		n := &routeNode{c: c}
		c.nodes = append(c.nodes, n)
		addrs[i] = servertest.Serve(t, n)
	}
	return c, addrs
}

// publish installs a topology over addrs with partitions dealt round-robin
// (or all to member only, when only >= 0) and groups by tenant.
func (c *cluster) publish(epoch uint64, addrs []string, only int) *routing.Table {
	owners := make([]uint32, 31)
	for i := range owners {
		owners[i] = uint32(i % len(addrs))
		if only >= 0 {
			owners[i] = uint32(only)
		}
	}
	resp := &weirv1.TopologyResponse{RingEpoch: epoch, Hash: routing.HashXX64, Owners: owners, PolicyVersion: "v1",
		GroupRules: []*weirv1.GroupRule{{Match: []string{"tenant"}, Group: "tenant"}}}
	for i, a := range addrs {
		resp.Members = append(resp.Members, &weirv1.Member{Name: fmt.Sprint("n", i), Address: a})
	}
	table, err := routing.NewTable(resp)
	if err != nil {
		panic(err)
	}
	c.topo.Store(resp)
	return table
}

func routeClient(t *testing.T, target string, window time.Duration) *client.Client {
	t.Helper()
	cfg := client.DefaultConfig()
	cfg.Target, cfg.Route, cfg.BatchWindow, cfg.Timeout = target, true, window, 10*time.Second
	cfg.RouteRefresh = time.Hour // only answers and failures ask for a refresh
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func waitEpoch(t *testing.T, c *client.Client, want uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.RouteEpoch() != want {
		if time.Now().After(deadline) {
			t.Fatalf("client epoch %d, want %d", c.RouteEpoch(), want)
		}
		time.Sleep(time.Millisecond) // polling the client's state
	}
}

func TestClient_Route_sendsEachRequestToItsOwner(t *testing.T) {
	for _, window := range []time.Duration{0, time.Millisecond} {
		c, addrs := newCluster(t, 3)
		table := c.publish(9, addrs, -1)
		cl := routeClient(t, addrs[0], window)
		waitEpoch(t, cl, 9)
		var wg sync.WaitGroup
		for i := range 60 {
			wg.Go(func() {
				if _, err := cl.Decide(t.Context(), map[string]string{"tenant": fmt.Sprint("t", i)}, 1); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		for i, n := range c.nodes {
			got := n.tenants()
			if len(got) == 0 {
				t.Errorf("window %v: node %d decided nothing", window, i)
			}
			for _, tenant := range got {
				if o, _ := table.Owner(map[string]string{"tenant": tenant}); o != i {
					t.Errorf("window %v: tenant %s decided by node %d, its owner is %d", window, tenant, i, o)
				}
			}
		}
	}
}

func TestClient_Route_staleEpochRefreshes(t *testing.T) {
	c, addrs := newCluster(t, 2)
	c.publish(1, addrs, 0) // everything on node 0
	cl := routeClient(t, addrs[0], 0)
	waitEpoch(t, cl, 1)
	c.publish(2, addrs, 1) // everything moves to node 1
	// The first answer (from node 0, epoch 2) tells the client its table
	// is stale; it refreshes without waiting for RouteRefresh (5s).
	if _, err := cl.Decide(t.Context(), map[string]string{"tenant": "x"}, 1); err != nil {
		t.Fatal(err)
	}
	waitEpoch(t, cl, 2)
	if _, err := cl.Decide(t.Context(), map[string]string{"tenant": "y"}, 1); err != nil {
		t.Fatal(err)
	}
	if got := c.nodes[1].tenants(); len(got) != 1 || got[0] != "y" {
		t.Errorf("node 1 decided %v, want [y]", got)
	}
}

func TestClient_Route_deadMemberFallsBackToTarget(t *testing.T) {
	c, addrs := newCluster(t, 2)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close() // nothing answers there any more
	c.publish(3, []string{addrs[0], dead}, 1)
	cl := routeClient(t, addrs[0], 0)
	waitEpoch(t, cl, 3)
	for i := range 20 {
		if _, err := cl.Decide(t.Context(), map[string]string{"tenant": fmt.Sprint("t", i)}, 1); err != nil {
			t.Fatalf("decision %d: %v", i, err)
		}
	}
	if got := len(c.nodes[0].tenants()); got != 20 {
		t.Errorf("target decided %d of 20 requests owned by a dead member", got)
	}
}

func TestClient_Route_DecideBatchTravelsWhole(t *testing.T) {
	c, addrs := newCluster(t, 2)
	table := c.publish(4, addrs, -1)
	cl := routeClient(t, addrs[0], 0)
	waitEpoch(t, cl, 4)
	// Two tenants of member 1, and one of each member.
	var own1 []*weirv1.DecideRequest
	var mixed []*weirv1.DecideRequest
	for i := 0; len(own1) < 2 || len(mixed) < 2; i++ {
		d := map[string]string{"tenant": fmt.Sprint("b", i)}
		o, _ := table.Owner(d)
		if o == 1 && len(own1) < 2 {
			own1 = append(own1, &weirv1.DecideRequest{Descriptors: d})
		}
		if len(mixed) == o {
			mixed = append(mixed, &weirv1.DecideRequest{Descriptors: d})
		}
	}
	for _, batch := range [][]*weirv1.DecideRequest{own1, mixed} {
		if _, err := cl.DecideBatch(t.Context(), batch); err != nil {
			t.Fatal(err)
		}
	}
	want := fmt.Sprint([]string{own1[0].Descriptors["tenant"], own1[1].Descriptors["tenant"]})
	if got := fmt.Sprint(c.nodes[1].tenants()); got != want {
		t.Errorf("member 1 decided %s; want only the single-owner batch %s", got, want)
	}
	if got := len(c.nodes[0].tenants()); got != 2 {
		t.Errorf("target decided %d requests, want the mixed batch's 2", got)
	}
}
