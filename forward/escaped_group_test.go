package forward

import (
	"fmt"
	"testing"

	"github.com/weirhq/weir/limitkey"
	"github.com/weirhq/weir/ring"
)

// TestRouter_ringChangeKeepsKeysOfEscapedGroups checks that a ring change
// drops only the keys whose group moved, judged by the group value that
// routes decisions, not by the escaped form keys carry in their hash tag.
// Without Redis a wrongly dropped key forgets its TAT, so the spent burst
// would come back.
func TestRouter_ringChangeKeepsKeysOfEscapedGroups(t *testing.T) {
	two, err := ring.New(ring.DefaultConfig(), "node-0", "node-1")
	if err != nil {
		t.Fatal(err)
	}
	three, err := ring.New(ring.DefaultConfig(), "node-0", "node-1", "node-2")
	if err != nil {
		t.Fatal(err)
	}
	// A tenant with a ':' (escaped to %3A in keys) whose owner stays put when
	// node-2 joins while its escaped form would hash to another owner.
	var tenant, owner string
	for i := range 10000 {
		g := fmt.Sprintf("org:%d", i)
		before, _ := two.Owner(g)
		after, _ := three.Owner(g)
		escaped, _ := three.Owner(limitkey.GroupTag(g))
		if before == after && escaped != after {
			tenant, owner = g, after
			break
		}
	}
	if tenant == "" {
		t.Fatal("no tenant found whose raw and escaped forms land on different owners")
	}
	tc := newTestCluster(t, 2, false)
	kv := map[string]string{"tenant": tenant, "user": "u1"}
	for range 5 { // per-user's whole burst
		if d := tc.decide(owner, kv); !d.Allowed || d.Fallback != nil {
			t.Fatalf("within the burst: %+v", d)
		}
	}
	tc.add("node-2")
	tc.sync()
	if d := tc.decide(owner, kv); d.Allowed {
		t.Fatalf("after node-2 joined, %s (still the owner of %q) admitted past the burst: its key was dropped: %+v", owner, tenant, d)
	}
}
