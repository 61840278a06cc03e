package forward

import (
	"context"
	"testing"
)

// A hand-off that lands while an owner is loading a key must not let the
// load re-create the key on the node that just gave the group away, nor
// let the decision be made there: the decision ends with the retryable
// ownership_changing fallback and the key stays dropped.
func TestRouter_handoffDuringLoad_doesNotRecreateTheKey(t *testing.T) {
	tc := newTestCluster(t, 2, true)
	ctx := context.Background()
	kv := map[string]string{"tenant": "t6", "user": "u1"}
	owner := tc.owner("t6")
	other := "node-0"
	if owner == other {
		other = "node-1"
	}
	c := tc.nodes[owner]
	moved := false
	c.redis.setOnLoad(func(ctx context.Context) {
		if !moved { // the ring changes while the first load is in flight
			moved = true
			c.router.SetMembers(ctx, map[string]string{other: other})
		}
	})
	d := tc.decide(owner, kv)
	if !moved {
		t.Fatal("the decision did not load its keys")
	}
	if d.Fallback == nil || d.Fallback.Reason != "ownership_changing" {
		t.Fatalf("decision across a hand-off: %+v, want fallback ownership_changing", d)
	}
	for _, k := range []string{"weir:{t6}:per-user:t6:u1", "weir:{t6}:per-tenant:t6"} {
		if c.mem.Has("t6", k) {
			t.Fatalf("%s is held on %s, which handed its group off", k, owner)
		}
	}
	// The next decision goes to the new owner and is normal.
	tc.nodes[other].router.SetMembers(ctx, map[string]string{other: other})
	if d := tc.decide(owner, kv); d.Fallback != nil || !d.Allowed {
		t.Fatalf("after the hand-off: %+v", d)
	}
}

// Scaling down on purpose is not a split: after 4 -> 2 graceful leaves the
// next join must move only the groups the newcomer takes, not make the
// remaining nodes forget (and reload) every key.
func TestRouter_scaleDownThenJoin_isNotARejoin(t *testing.T) {
	tc := newTestCluster(t, 4, true)
	tc.remove("node-3")
	tc.remove("node-2")
	kvs := make([]map[string]string, 8)
	for i := range kvs {
		kvs[i] = map[string]string{"tenant": "s" + string(rune('a'+i)), "user": "u1"}
		if d := tc.decide("node-0", kvs[i]); !d.Allowed || d.Fallback != nil {
			t.Fatalf("before the join: %+v", d)
		}
	}
	held := func(name string) int { return tc.nodes[name].mem.Len() }
	before := held("node-0") + held("node-1")
	tc.add("node-new")
	tc.sync()
	for _, name := range []string{"node-0", "node-1"} {
		if got := tc.metric(name, "weir_rejoins_total"); got != 0 {
			t.Fatalf("%s counted %v rejoins after a planned scale-down and a join", name, got)
		}
	}
	moved := 0
	for _, kv := range kvs {
		if tc.owner(kv["tenant"]) == "node-new" {
			moved += 2 // per-user and per-tenant keys
		}
	}
	if after := held("node-0") + held("node-1"); after != before-moved {
		t.Fatalf("the old nodes hold %d keys after the join, want %d (%d before, %d moved)", after, before-moved, before, moved)
	}
}
