package cluster

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/peer/peertest"
	"github.com/weirhq/weir/policy"
	"github.com/weirhq/weir/redisbackend/redistest"
)

const leasePolicy = `
version: lease-test
limits:
  - {name: hot, match: [tenant], rate: 1000/s, burst: 100, on_failure: closed, lease: {max: 20, ttl: 250ms}}
  - {name: small, match: [room], rate: 1000/s, burst: 8, lease: {max: 20, ttl: 250ms}}
  - {name: per-user, match: [tenant, user], group: tenant, rate: 50/s, burst: 5}
`

var hotLimit = gcra.Limit{Interval: 1_000_000, Burst: 100}

// leaseCluster is a testCluster whose nodes grant and hold leases, on the
// shared fake clock, with per-node registries for the lease metrics.
type leaseCluster struct {
	*testCluster
	regs map[string]*prometheus.Registry
}

func newLeaseCluster(t testing.TB, n int, withRedis bool) *leaseCluster {
	t.Helper()
	return newLeaseClusterOf(t, n, withRedis, leasePolicy)
}

// newLeaseClusterOf is newLeaseCluster under the policy text.
func newLeaseClusterOf(t testing.TB, n int, withRedis bool, text string) *leaseCluster {
	t.Helper()
	pol, err := policy.Parse("lease.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	tc := &testCluster{t: t, net: peertest.NewNetwork(), clock: newClock(), pol: pol, nodes: map[string]*testNode{}, member: map[string]string{}}
	if withRedis {
		tc.redis = redistest.Start(t)
	}
	lc := &leaseCluster{testCluster: tc, regs: map[string]*prometheus.Registry{}}
	for i := range n {
		lc.addLeasing(fmt.Sprintf("node-%d", i))
	}
	tc.sync()
	return lc
}

func (lc *leaseCluster) addLeasing(name string) *testNode {
	n := lc.add(name)
	cfg := DefaultLeaseConfig()
	cfg.Grantor.Grace = time.Millisecond
	reg := prometheus.NewRegistry()
	deps := LeaseDeps{Leaser: lc.net.Leaser(name), Policies: policy.Static(lc.pol), Incarnation: "1", Now: lc.clock.Now}
	if err := n.cluster.EnableLeases(cfg, deps, reg); err != nil {
		lc.t.Fatal(err)
	}
	lc.regs[name] = reg
	return n
}

// ownerAndPeers returns the owner of group and the other nodes, sorted.
func (lc *leaseCluster) ownerAndPeers(group string) (string, []string) {
	names := lc.names()
	slices.Sort(names)
	owner := lc.nodes[names[0]].cluster.owner(group)
	return owner, slices.DeleteFunc(names, func(n string) bool { return n == owner })
}

// tick runs one lease tick on every node.
func (lc *leaseCluster) tick() {
	for _, n := range lc.nodes {
		n.cluster.LeaseTick(context.Background())
	}
}

// warm sends requests for kv through node every millisecond, ticking
// every node after each, until node holds a lease on kv's key; it returns
// how many requests that took.
func (lc *leaseCluster) warm(node string, kv map[string]string) int {
	lc.t.Helper()
	for i := 1; i <= 200; i++ {
		lc.decide(node, kv)
		lc.clock.Add(time.Millisecond)
		lc.tick()
		if lc.units(node, kv) > 0 {
			return i
		}
	}
	lc.t.Fatalf("%s got no lease on %v", node, kv)
	return 0
}

// keyOf is the storage key leasePolicy gives kv's hot or small limit.
func keyOf(kv map[string]string) string {
	if r, ok := kv["room"]; ok {
		return "weir:{" + r + "}:small:" + r
	}
	return "weir:{" + kv["tenant"] + "}:hot:" + kv["tenant"]
}

// units is what node holds on kv's key now.
func (lc *leaseCluster) units(node string, kv map[string]string) int64 {
	l := lc.nodes[node].cluster.leases
	l.hmu.Lock()
	defer l.hmu.Unlock()
	return l.h.Units(keyOf(kv), l.monoNow())
}

// metric reads one counter of node's lease registry by its labels
// (name, value pairs); 0 when absent.
func (lc *leaseCluster) metric(node, name string, labels ...string) float64 {
	lc.t.Helper()
	mfs, err := lc.regs[node].Gather()
	if err != nil {
		lc.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			match := true
			for i := 0; i+1 < len(labels); i += 2 {
				match = match && got[labels[i]] == labels[i+1]
			}
			if match {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
