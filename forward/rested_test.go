package forward

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/owner"
	"github.com/weirhq/weir/ring"
)

// The owner's load rule (package rested) in a cluster whose owners measure
// ownership on the shared clock: while the ring stands still, first touches
// of spread keys need no load; after a join, a graceful leave and a crash,
// the TAT the previous owner left in Redis is honoured.

// restedCluster is a three-node cluster with Redis whose owners run on the
// shared clock, at the smallest margin.
func restedCluster(t *testing.T) *testCluster {
	return newTestClusterWith(t, 3, true, func(tc *testCluster) {
		tc.ownerClock = tc.clock
		tc.ownerCfg = func(c *owner.Config) { c.Rested.Margin = restedMargin }
	})
}

const restedMargin = 100 * time.Millisecond

// settle lets the load rule's span (twice burst × interval: per-tenant's
// 200 ms, doubled for a settlement's excess) and the margin pass for the
// test policy's limits.
func (tc *testCluster) settle() { tc.clock.Add(restedMargin + 2*200*time.Millisecond) }

func (tc *testCluster) loads() (n float64) {
	for name := range tc.nodes {
		n += tc.metric(name, "weir_owner_state_loads_total")
	}
	return n
}

// spread decides one request for each of n new tenants, through every node
// in turn, and returns how many loads they cost.
func (tc *testCluster) spread(t *testing.T, prefix string, n int) float64 {
	t.Helper()
	before, names := tc.loads(), tc.names()
	for i := range n {
		d := tc.decide(names[i%len(names)], map[string]string{"tenant": fmt.Sprintf("%s-%d", prefix, i), "user": "u"})
		if !d.Allowed || d.Fallback != nil {
			t.Fatalf("spread decision %d: %+v", i, d)
		}
	}
	return tc.loads() - before
}

// spendAtOwner spends kv's per-user burst at its owner and persists it.
func (tc *testCluster) spendAtOwner(t *testing.T, kv map[string]string) string {
	t.Helper()
	owner := tc.owner(kv["tenant"])
	for range perUser.Burst {
		if d := tc.decide(owner, kv); !d.Allowed {
			t.Fatalf("burst denied at the owner: %+v", d)
		}
	}
	if err := tc.nodes[owner].wb.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	return owner
}

func TestRouter_restedKeys_noLoadWhileStableExactAfterChanges(t *testing.T) {
	tc := restedCluster(t)
	if n := tc.spread(t, "early", 30); n == 0 {
		t.Fatal("no loads within span + margin of the ring's first change")
	}
	tc.settle()
	if n := tc.spread(t, "stable", 60); n != 0 {
		t.Fatalf("%v loads of spread keys while the ring stood still", n)
	}

	crashed := ""
	for _, change := range []struct {
		name, joins string // joins: the node this change adds
		do          func(owner string)
	}{
		{"join", "node-3", func(string) { tc.add("node-3"); tc.sync() }},
		{"leave", "", func(owner string) { tc.remove(owner) }},
		{"crash", "", func(owner string) { crashed = owner; tc.crash(owner) }},
		{"return", "", func(string) { tc.add(crashed); tc.sync() }},
	} {
		joins := change.joins
		if change.name == "return" {
			joins = crashed
		}
		// A tenant this change moves: spend its burst at its owner first.
		kv := tc.movedTenant(t, change.name, joins)
		before := tc.owner(kv["tenant"])
		tc.settle() // everything rested: the rule is on at every node
		tc.spendAtOwner(t, kv)
		change.do(before)
		if after := tc.owner(kv["tenant"]); after == before {
			t.Fatalf("%s: %s did not move", change.name, kv["tenant"])
		}
		for _, name := range tc.names() {
			if d := tc.decide(name, kv); d.Allowed || d.Fallback != nil {
				t.Fatalf("%s: %s granted the burst its previous owner spent: %+v", change.name, name, d)
			}
		}
		tc.settle()
		if n := tc.spread(t, change.name+"-after", 30); n != 0 {
			t.Fatalf("%s: %v loads of spread keys once the ring stood still again", change.name, n)
		}
	}
}

// movedTenant returns a tenant that node joins would take (any tenant when
// joins is empty: a leave or crash of its owner moves it).
func (tc *testCluster) movedTenant(t *testing.T, prefix, joins string) map[string]string {
	t.Helper()
	if joins == "" {
		return map[string]string{"tenant": prefix + "-0", "user": "u"}
	}
	r, err := ring.New(ring.DefaultConfig(), append(tc.names(), joins)...)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		tenant := fmt.Sprintf("%s-%d", prefix, i)
		if o, _ := r.Owner(tenant); o == joins {
			return map[string]string{"tenant": tenant, "user": "u"}
		}
	}
	t.Fatalf("no tenant moves to %s", joins)
	return nil
}

// crash removes a node without a hand-off: its memory is lost and the
// others learn it is gone, as when it is SIGKILLed.
func (tc *testCluster) crash(name string) {
	delete(tc.nodes, name)
	delete(tc.member, name)
	tc.net.Unregister(name)
	tc.sync()
}
