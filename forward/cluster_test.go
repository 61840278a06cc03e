package forward

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/breaker"
	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/owner"
	"github.com/weirhq/weir/peer"
)

var perUser = gcra.Limit{Interval: 20_000_000, Burst: 5} // 50/s

func TestRouter_oneKeyThroughEveryNode_isExact(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprint(n, " nodes"), func(t *testing.T) {
			tc := newTestCluster(t, n, false)
			adm, fb := tc.hammer(map[string]string{"tenant": "t1", "user": "u1"}, 2000, 7*time.Millisecond)
			if fb != 0 {
				t.Fatalf("%d fallback decisions in a healthy cluster", fb)
			}
			checkBound(t, perUser, adm)
			// 2000 requests every 7ms for 14s at 50/s: ~700 + burst admitted.
			if len(adm) < 690 {
				t.Fatalf("only %d admitted: the cluster over-denies", len(adm))
			}
		})
	}
}

func TestRouter_membershipChangesKeepTATs(t *testing.T) {
	tc := newTestCluster(t, 3, true)
	kv := map[string]string{"tenant": "t7", "user": "u1"}
	adm, fb := tc.hammer(kv, 300, 7*time.Millisecond)
	tc.add("node-new")
	tc.sync()
	more, fb2 := tc.hammer(kv, 300, 7*time.Millisecond)
	adm = append(adm, more...)
	owner := tc.owner("t7")
	tc.remove(owner) // the current owner leaves: its TATs must survive
	more, fb3 := tc.hammer(kv, 300, 7*time.Millisecond)
	adm = append(adm, more...)
	if fb+fb2+fb3 != 0 {
		t.Fatalf("fallback decisions: %d %d %d", fb, fb2, fb3)
	}
	checkBound(t, perUser, adm)
}

func TestRouter_ownerReturnsToNodeWithStaleMemory(t *testing.T) {
	tc := newTestCluster(t, 2, true)
	kv := map[string]string{"tenant": "t3", "user": "u9"}
	owner := tc.owner("t3")
	other := "node-0"
	if owner == other {
		other = "node-1"
	}
	// Spend the burst at the owner.
	for range 5 {
		if d := tc.decide(owner, kv); !d.Allowed {
			t.Fatal("burst denied")
		}
	}
	tc.remove(owner) // hands off; the other node now owns t3
	if d := tc.decide(other, kv); d.Allowed {
		t.Fatalf("the new owner granted a fresh burst: %+v", d)
	}
}

func TestRouter_partitionedOwnerFallsBackWithinDeadline(t *testing.T) {
	tc := newTestCluster(t, 3, false)
	owner := tc.owner("t5")
	var others []string
	for name := range tc.nodes {
		if name != owner {
			others = append(others, name)
			tc.net.Blackhole(name, owner)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	d, err := tc.nodes[others[0]].lim.Decide(ctx, limiter.Request{Descriptors: map[string]string{"tenant": "t5", "user": "u1"}, Cost: 1})
	elapsed := time.Since(start)
	if err == nil && (d.Fallback == nil || d.Fallback.Reason != "owner_unreachable") {
		t.Fatalf("decision through a partition was not flagged: %+v", d)
	}
	if elapsed > 50*time.Millisecond+100*time.Millisecond {
		t.Fatalf("caller waited %s past a 50ms deadline", elapsed)
	}
	// The owner itself keeps deciding.
	if d := tc.decide(owner, map[string]string{"tenant": "t5", "user": "u1"}); d.Fallback != nil {
		t.Fatalf("owner fell back: %+v", d)
	}
}

func TestRouter_strictLimitIsDecidedByRedisExactly(t *testing.T) {
	tc := newTestCluster(t, 3, true)
	names := tc.names()
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for i := range 60 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			d, err := tc.nodes[names[i%3]].lim.Decide(ctx, limiter.Request{Descriptors: map[string]string{"org": "o1", "account": "a1"}, Cost: 1})
			if err != nil || d.Fallback != nil {
				t.Errorf("%+v %v", d, err)
				return
			}
			if d.Allowed {
				mu.Lock()
				admitted++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if admitted != 5 {
		t.Fatalf("admitted %d of 60 concurrent strict requests, want exactly the burst 5", admitted)
	}
	if n := tc.redis.Client().Exists(context.Background(), "weir:{o1}:strict-account:o1:a1").Val(); n != 1 {
		t.Fatal("strict decision left no state in Redis")
	}
}

func TestRouter_breakerTurnsDeadOwnerIntoFastFallback(t *testing.T) {
	tc := newTestCluster(t, 2, false)
	owner := tc.owner("t9")
	other := "node-0"
	if owner == other {
		other = "node-1"
	}
	bcfg := breaker.DefaultConfig()
	set, err := breaker.NewSet(bcfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tc.nodes[other].router.deps.Breakers = set
	tc.net.Blackhole(other, owner)
	kv := map[string]string{"tenant": "t9", "user": "u1"}
	decideWithin := func(d time.Duration) (limiter.Decision, time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		start := time.Now()
		dec, err := tc.nodes[other].lim.Decide(ctx, limiter.Request{Descriptors: kv, Cost: 1})
		if err != nil {
			t.Fatal(err)
		}
		return dec, time.Since(start)
	}
	tc.nodes[other].router.deps.Forwarder = timeoutForwarder{tc.net.Forwarder(other), 5 * time.Millisecond}
	for range bcfg.ConsecutiveFailures {
		if d, _ := decideWithin(time.Second); d.Fallback == nil || d.Fallback.Reason != "owner_unreachable" {
			t.Fatalf("%+v", d)
		}
	}
	if got := set.Get(owner).State(); got != breaker.Open {
		t.Fatalf("breaker %s after %d timeouts", got, bcfg.ConsecutiveFailures)
	}
	d, took := decideWithin(time.Second)
	if d.Fallback == nil || took > 5*time.Millisecond {
		t.Fatalf("open breaker: decision %+v took %s, want an immediate fallback", d, took)
	}
}

// timeoutForwarder bounds each forward like peer.Client's Timeout does.
type timeoutForwarder struct {
	peer.Forwarder
	timeout time.Duration
}

func (f timeoutForwarder) Decide(ctx context.Context, addr string, it decide.Request) (peer.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	return f.Forwarder.Decide(ctx, addr, it)
}

// A paused Redis must not make a healthy owner look unreachable: the owner
// answers a forwarded batch before the sender's deadline, deciding what it
// holds in memory and failing only the item that needed Redis.
func TestRouter_slowRedisOwnerStillAnswersInTime(t *testing.T) {
	// The owner's own Redis budget is far away, so only the sender's
	// deadline can end the load. That deadline is generous so that
	// scheduling noise on a busy machine cannot eat the quarter the owner
	// leaves for the reply (500ms here): 10ms and 100ms to spare were both
	// eaten under load.
	tc := newTestClusterWith(t, 2, true, func(tc *testCluster) {
		tc.ownerCfg = func(c *owner.Config) { c.LoadTimeout = time.Minute }
	})
	owner := tc.owner("t1")
	node := tc.nodes[owner].owner
	hot := map[string]string{"tenant": "t1", "user": "u1"}
	if d := tc.decide(owner, hot); d.Fallback != nil || !d.Allowed {
		t.Fatalf("warm-up: %+v", d)
	}
	item := func(user string) decide.Request {
		keys := []string{"weir:{t1}:per-user:t1:" + user, "weir:{t1}:per-tenant:t1"}
		return decide.Request{Group: "t1", Keys: keys, Limits: []gcra.Limit{perUser, {Interval: 10_000_000, Burst: 20}},
			Cost: 1, Now: tc.clock.Nanos()}
	}
	tc.redis.Pause()
	defer tc.redis.Resume()

	const deadline = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	rs := node.HandleDecide(ctx, "node-x", []decide.Request{item("cold"), item("u1")})
	if took := time.Since(start); took >= deadline {
		t.Fatalf("owner answered after %s; the sender gives up at %s", took, deadline)
	}
	if rs[0].Err == nil {
		t.Fatalf("the item that needed Redis was decided: %+v", rs[0])
	}
	if rs[1].Err != nil || !rs[1].Overall.Allowed {
		t.Fatalf("the item held in memory was not decided: %+v", rs[1])
	}
	if rs[0].Reason != "state_load_failed" {
		t.Fatalf("the failed item carries reason %q, want the owner's state_load_failed", rs[0].Reason)
	}
	// The sender's fallback names the owner's reason.
	other := "node-0"
	if owner == other {
		other = "node-1"
	}
	d := tc.decide(other, map[string]string{"tenant": "t1", "user": "cold2"})
	if d.Fallback == nil || d.Fallback.Reason != "state_load_failed" {
		t.Fatalf("fallback through a forward: %+v, want reason state_load_failed", d.Fallback)
	}
}

// The small side of a split keeps deciding the groups it holds in memory
// while the other side, having declared it dead, decides them from Redis.
// When the split heals, the node that was cut off must reload, not resume
// from its own older TATs.
func TestRouter_cutOffOwnerReloadsWhenTheSplitHeals(t *testing.T) {
	tc := newTestCluster(t, 3, true)
	ctx := context.Background()
	kv := map[string]string{"tenant": "t4", "user": "u1"}
	owner := tc.owner("t4")
	if d := tc.decide(owner, kv); !d.Allowed {
		t.Fatalf("first decision denied: %+v", d)
	}
	// The owner's write-behind persists that decision before the split (in
	// a real cluster its flush interval passes long before failure
	// detection ends). Without this the majority may load the key before
	// the owner's flusher ran, and legitimately grant the whole burst again.
	if err := tc.nodes[owner].wb.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Split: the owner alone on one side, the other two on the other.
	var others []string
	majority := map[string]string{}
	for name := range tc.nodes {
		if name != owner {
			others = append(others, name)
			majority[name] = name
		}
	}
	// Each side's failure detector declares the other side dead.
	tc.nodes[owner].router.SetMembersFailed(ctx, map[string]string{owner: owner}, others)
	for _, name := range others {
		tc.nodes[name].router.SetMembersFailed(ctx, majority, []string{owner})
	}
	// The majority spends the rest of the burst and persists it. The
	// owner's first admission left the key one unit from rested, which the
	// owner need not persist (Config.PersistSlack): the majority may grant
	// that much more, as after a crash, and no more.
	admitted := 0
	for range 10 {
		d := tc.decide(others[0], kv)
		if d.Fallback != nil {
			t.Fatalf("majority side: %+v", d)
		}
		if d.Allowed {
			admitted++
		}
	}
	if slack := int(ownerDefaults().PersistSlack); admitted < 4 || admitted > 4+slack {
		t.Fatalf("majority admitted %d of a burst of 5 with 1 spent; want 4 to %d", admitted, 4+slack)
	}
	for _, name := range others {
		if err := tc.nodes[name].wb.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Heal: the owner gets its groups back and must see the spent burst.
	tc.sync()
	if d := tc.decide(owner, kv); d.Allowed {
		t.Fatalf("the rejoined owner granted the burst the other side spent: %+v", d)
	}
	if got := tc.metric(owner, "weir_rejoins_total"); got != 1 {
		t.Fatalf("weir_rejoins_total = %v, want 1", got)
	}
	for _, name := range others {
		if got := tc.metric(name, "weir_rejoins_total"); got != 0 {
			t.Fatalf("%s, on the majority side, counted a rejoin", name)
		}
	}
}
