package main

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/client"
	"github.com/weirhq/weir/redisbackend/redistest"
)

// startRouteCluster starts size in-process nodes with Redis and gossip,
// n0 first and the others joining it, and waits until every node sees all.
func startRouteCluster(t *testing.T, size int) ([]*node, string) {
	t.Helper()
	srv := redistest.Start(t)
	nodes := make([]*node, 0, size)
	for i := range size {
		args := []string{"--redis-addr", srv.Addr(), "--gossip-addr", "127.0.0.1:0", "--node-name", fmt.Sprintf("n%d", i)}
		if i > 0 {
			args = append(args, "--join", nodes[0].members.GossipAddr())
		}
		n, _ := startNode(t, args...)
		nodes = append(nodes, n)
	}
	waitConverged(t, nodes)
	return nodes, srv.Addr()
}

// waitConverged waits until every node sees exactly the others and all
// agree on the ring, and returns that ring's epoch.
func waitConverged(t *testing.T, nodes []*node) uint64 {
	t.Helper()
	waitFor(t, 20*time.Second, func() bool {
		for _, n := range nodes {
			if n.state.router.Members() != len(nodes) || n.state.ring.Epoch() != nodes[0].state.ring.Epoch() {
				return false
			}
		}
		return true
	})
	return nodes[0].state.ring.Epoch()
}

func newRouteClient(t *testing.T, target string, route bool, window time.Duration) *client.Client {
	t.Helper()
	cfg := client.DefaultConfig()
	cfg.Target, cfg.Route, cfg.BatchWindow = target, route, window
	cfg.Timeout = 5 * time.Second
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// forwards sums weir_forwards_total over every result on nodes.
func forwards(t *testing.T, nodes []*node) int {
	t.Helper()
	total := 0
	for _, n := range nodes {
		resp, err := http.Get("http://" + n.httpAddr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(body), "\n") {
			if rest, ok := strings.CutPrefix(line, "weir_forwards_total{"); ok {
				v, err := strconv.ParseFloat(rest[strings.LastIndexByte(rest, ' ')+1:], 64)
				if err != nil {
					t.Fatalf("%q: %v", line, err)
				}
				total += int(v)
			}
		}
	}
	return total
}

// spread decides once for each of tenants distinct tenants and fails the
// test on any error.
func spread(t *testing.T, c *client.Client, round, tenants int) {
	t.Helper()
	for i := range tenants {
		d := map[string]string{"tenant": fmt.Sprintf("t%d-%d", round, i), "user": "u"}
		if _, err := c.Decide(t.Context(), d, 1); err != nil {
			t.Fatalf("tenant %d: %v", i, err)
		}
	}
}

// TestRoute_spreadWorkloadIsNotForwarded is issue 12's forward hop: sent
// to one node, about two thirds of a spread workload is forwarded; routed
// by the client, none is.
func TestRoute_spreadWorkloadIsNotForwarded(t *testing.T) {
	nodes, _ := startRouteCluster(t, 3)
	const tenants = 300
	plain := newRouteClient(t, nodes[0].grpcAddr(), false, 0)
	before := forwards(t, nodes)
	spread(t, plain, 0, tenants)
	unrouted := forwards(t, nodes) - before
	if unrouted < tenants/3 {
		t.Fatalf("without routing only %d of %d decisions were forwarded; the test cannot tell routing apart", unrouted, tenants)
	}

	for _, window := range []time.Duration{0, 200 * time.Microsecond} {
		routed := newRouteClient(t, nodes[0].grpcAddr(), true, window)
		epoch := nodes[0].state.ring.Epoch()
		waitFor(t, 10*time.Second, func() bool { return routed.RouteEpoch() == epoch })
		before = forwards(t, nodes)
		var wg sync.WaitGroup
		for w := range 4 { // concurrent callers, so batches form
			wg.Go(func() { spread(t, routed, 1+w, tenants/4) })
		}
		wg.Wait()
		got := forwards(t, nodes) - before
		t.Logf("window %v: %d forwarded routed, %d of %d without routing", window, got, unrouted, tenants)
		if got != 0 {
			t.Errorf("window %v: %d of %d routed decisions were forwarded, want 0 (%d without routing)", window, got, tenants, unrouted)
		}
	}
}

// traffic runs callers deciding for spread tenants until stop is closed,
// and counts decisions and errors.
func traffic(t *testing.T, c *client.Client, callers int, stop <-chan struct{}) (wait func() (ok, failed int64)) {
	var wg sync.WaitGroup
	var okN, failedN atomic.Int64
	for w := range callers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				d := map[string]string{"tenant": fmt.Sprintf("w%d-%d", w, i%500), "user": "u"}
				if _, err := c.Decide(t.Context(), d, 1); err != nil {
					if failedN.Add(1) <= 5 {
						t.Errorf("caller %d: %v", w, err)
					}
					continue
				}
				okN.Add(1)
			}
		})
	}
	return func() (int64, int64) { wg.Wait(); return okN.Load(), failedN.Load() }
}

// TestRoute_ringChangeDuringTraffic joins a node and has another leave
// while routed callers decide: no caller sees an error, and the client
// follows the ring.
func TestRoute_ringChangeDuringTraffic(t *testing.T) {
	nodes, redisAddr := startRouteCluster(t, 3)
	c := newRouteClient(t, nodes[0].grpcAddr(), true, 100*time.Microsecond)
	waitFor(t, 10*time.Second, func() bool { return c.RouteEpoch() == nodes[0].state.ring.Epoch() })
	stop := make(chan struct{})
	wait := traffic(t, c, 8, stop)

	joined, _ := startNode(t, "--redis-addr", redisAddr, "--gossip-addr", "127.0.0.1:0",
		"--node-name", "n3", "--join", nodes[0].members.GossipAddr())
	grown := append(nodes[:3:3], joined)
	epoch := waitConverged(t, grown)
	waitFor(t, 10*time.Second, func() bool { return c.RouteEpoch() == epoch })

	nodes[2].shutdown(t.Context(), 5*time.Second) // a graceful leave
	left := []*node{nodes[0], nodes[1], joined}
	epoch = waitConverged(t, left)
	waitFor(t, 10*time.Second, func() bool { return c.RouteEpoch() == epoch })
	close(stop)
	ok, failed := wait()
	if failed != 0 || ok == 0 {
		t.Fatalf("%d decisions, %d errors; want no error", ok, failed)
	}
}

// TestRoute_memberDiesClientFallsBack crashes a node (its servers stop and
// gossip ends without a leave) under routed traffic: calls for its groups
// fall back to the target, which answers by the failure policy until the
// cluster drops the node; no caller sees an error.
func TestRoute_memberDiesClientFallsBack(t *testing.T) {
	nodes, _ := startRouteCluster(t, 3)
	c := newRouteClient(t, nodes[0].grpcAddr(), true, 0)
	waitFor(t, 10*time.Second, func() bool { return c.RouteEpoch() == nodes[0].state.ring.Epoch() })
	stop := make(chan struct{})
	wait := traffic(t, c, 8, stop)

	dead := nodes[2]
	dead.grpc.Stop()
	dead.peerGRPC.Stop()
	if err := dead.members.Shutdown(); err != nil {
		t.Fatal(err)
	}
	epoch := waitConverged(t, nodes[:2])
	waitFor(t, 20*time.Second, func() bool { return c.RouteEpoch() == epoch })
	close(stop)
	ok, failed := wait()
	if failed != 0 || ok == 0 {
		t.Fatalf("%d decisions, %d errors; want no error", ok, failed)
	}
}
