package forward

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/lease"
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
// shared fake clock; each node's registry holds the lease metrics.
type leaseCluster struct {
	*testCluster
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
	tc := &testCluster{t: t, net: peertest.NewNetwork(), clock: newClock(), pol: pol, nodes: map[string]*testNode{}, member: map[string]string{}, leasing: true}
	if withRedis {
		tc.redis = redistest.Start(t)
	}
	lc := &leaseCluster{testCluster: tc}
	for i := range n {
		lc.addLeasing(fmt.Sprintf("node-%d", i))
	}
	tc.sync()
	return lc
}

func (lc *leaseCluster) addLeasing(name string) *testNode { return lc.add(name) }

// leaseGrantorConfig is the owner's ledger settings of node name in these
// tests: lease numbers of incarnation 1, and a 1ms grace.
func leaseGrantorConfig(name string) lease.GrantorConfig {
	cfg := lease.DefaultGrantorConfig()
	cfg.Name, cfg.Grace = name+"#1", time.Millisecond
	return cfg
}

// ownerAndPeers returns the owner of group and the other nodes, sorted.
func (lc *leaseCluster) ownerAndPeers(group string) (string, []string) {
	names := lc.names()
	slices.Sort(names)
	owner := lc.nodes[names[0]].routes.Owner(group)
	return owner, slices.DeleteFunc(names, func(n string) bool { return n == owner })
}

// tick runs one lease tick on every node.
func (lc *leaseCluster) tick() {
	for _, n := range lc.nodes {
		n.leases.Tick(context.Background())
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
	return lc.nodes[node].leases.Units(keyOf(kv))
}
