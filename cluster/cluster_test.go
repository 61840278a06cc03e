package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/breaker"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/peer"
	"github.com/weirhq/weir/peer/peertest"
	"github.com/weirhq/weir/policy"
	"github.com/weirhq/weir/redisbackend"
	"github.com/weirhq/weir/redisbackend/redistest"
	"github.com/weirhq/weir/ring"
	"github.com/weirhq/weir/writebehind"
)

const testPolicy = `
version: cluster-test
limits:
  - {name: per-user, match: [tenant, user], group: tenant, rate: 50/s, burst: 5}
  - {name: per-tenant, match: [tenant], rate: 100/s, burst: 20}
  - {name: strict-account, match: [org, account], group: org, rate: 1/m, burst: 5, consistency: strict}
`

// clock is the one time base every test node shares.
type clock struct {
	mu  sync.Mutex
	now int64
}

func (c *clock) Now() time.Time        { c.mu.Lock(); defer c.mu.Unlock(); return time.Unix(0, c.now) }
func (c *clock) Nanos() int64          { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration)   { c.mu.Lock(); c.now += int64(d); c.mu.Unlock() }
func newClock() *clock                 { return &clock{now: time.Now().UnixNano()} }
func (c *clock) nowFunc() func() int64 { return c.Nanos }

type testNode struct {
	name    string
	cluster *Cluster
	lim     *limiter.Limiter
	wb      *writebehind.Writer
	cancel  context.CancelFunc
	done    chan struct{}
}

type testCluster struct {
	t      testing.TB
	net    *peertest.Network
	clock  *clock
	pol    *policy.Policy
	redis  *redistest.Server // nil: no Redis
	nodes  map[string]*testNode
	member map[string]string
}

func newTestCluster(t testing.TB, n int, withRedis bool) *testCluster {
	t.Helper()
	pol, err := policy.Parse("test.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	tc := &testCluster{t: t, net: peertest.NewNetwork(), clock: newClock(), pol: pol, nodes: map[string]*testNode{}, member: map[string]string{}}
	if withRedis {
		tc.redis = redistest.Start(t)
	}
	for i := range n {
		tc.add(fmt.Sprintf("node-%d", i))
	}
	tc.sync()
	return tc
}

// add starts a node; it joins the ring at the next sync.
func (tc *testCluster) add(name string) *testNode {
	t := tc.t
	r, err := ring.New(ring.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	deps := Deps{Ring: r, Forwarder: tc.net.Forwarder(name), Mem: memstore.New(memstore.DefaultConfig()), Now: tc.clock.Now}
	node := &testNode{name: name, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	node.cancel = cancel
	if tc.redis != nil {
		client := redis.NewClient(&redis.Options{Addr: tc.redis.Addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { client.Close() })
		b, err := redisbackend.New(client, redisbackend.Config{Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		wcfg := writebehind.DefaultConfig()
		node.wb, err = writebehind.New(wcfg, b, tc.clock.nowFunc(), nil, prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		deps.Redis, deps.WriteBehind = b, node.wb
		go func() { node.wb.Run(ctx); close(node.done) }()
	} else {
		close(node.done)
	}
	cfg := DefaultConfig()
	cfg.LocalName = name
	// Generous Redis budgets: these tests judge decisions, not latency, and
	// a loaded machine under -race overran the 20ms strict default.
	cfg.LoadTimeout, cfg.StrictTimeout = time.Second, time.Second
	node.cluster, err = New(cfg, deps, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	node.lim, err = limiter.New(limiter.DefaultConfig(), policy.Static(tc.pol), node.cluster, nil, prometheus.NewRegistry(), limiter.WithClock(tc.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	tc.net.Register(name, node.cluster)
	tc.nodes[name] = node
	tc.member[name] = name // the in-memory network addresses nodes by name
	t.Cleanup(func() { cancel(); <-node.done })
	return node
}

// sync gives every node the current membership, as gossip would.
func (tc *testCluster) sync() {
	for _, n := range tc.nodes {
		n.cluster.SetMembers(context.Background(), tc.member)
	}
}

// remove takes a node out gracefully: it hands off, then the others learn.
func (tc *testCluster) remove(name string) {
	n := tc.nodes[name]
	n.cluster.Handoff(context.Background())
	delete(tc.nodes, name)
	delete(tc.member, name)
	tc.net.Unregister(name)
	tc.sync()
}

func (tc *testCluster) names() []string {
	var out []string
	for name := range tc.nodes {
		out = append(out, name)
	}
	return out
}

type admission struct{ at, cost int64 }

// checkBound asserts admitted cost <= B + W/T over every window between
// admissions, exactly (multiplied through by T).
func checkBound(t *testing.T, l gcra.Limit, adm []admission) {
	t.Helper()
	for i := range adm {
		var sum int64
		for j := i; j < len(adm); j++ {
			sum += adm[j].cost
			if w := adm[j].at - adm[i].at; sum*l.Interval > l.Span()+w {
				t.Fatalf("%d units admitted in %dns; bound is %d + %d/%d", sum, w, l.Burst, w, l.Interval)
			}
		}
	}
}

func (tc *testCluster) decide(node string, kv map[string]string) limiter.Decision {
	tc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	d, err := tc.nodes[node].lim.Decide(ctx, limiter.Request{Descriptors: kv, Cost: 1})
	if err != nil {
		tc.t.Fatal(err)
	}
	return d
}

// hammer sends requests for one key round-robin through all nodes, the
// shared clock advancing by step between requests, and returns admissions.
func (tc *testCluster) hammer(kv map[string]string, requests int, step time.Duration) (adm []admission, fallbacks int) {
	names := tc.names()
	for i := range requests {
		d := tc.decide(names[i%len(names)], kv)
		if d.Fallback != nil {
			fallbacks++
			continue
		}
		if d.Allowed {
			adm = append(adm, admission{tc.clock.Nanos(), 1})
		}
		tc.clock.Add(step)
	}
	return adm, fallbacks
}

var perUser = gcra.Limit{Interval: 20_000_000, Burst: 5} // 50/s

func TestCluster_oneKeyThroughEveryNode_isExact(t *testing.T) {
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

func TestCluster_membershipChangesKeepTATs(t *testing.T) {
	tc := newTestCluster(t, 3, true)
	kv := map[string]string{"tenant": "t7", "user": "u1"}
	adm, fb := tc.hammer(kv, 300, 7*time.Millisecond)
	tc.add("node-new")
	tc.sync()
	more, fb2 := tc.hammer(kv, 300, 7*time.Millisecond)
	adm = append(adm, more...)
	owner := tc.nodes["node-0"].cluster.owner("t7")
	tc.remove(owner) // the current owner leaves: its TATs must survive
	more, fb3 := tc.hammer(kv, 300, 7*time.Millisecond)
	adm = append(adm, more...)
	if fb+fb2+fb3 != 0 {
		t.Fatalf("fallback decisions: %d %d %d", fb, fb2, fb3)
	}
	checkBound(t, perUser, adm)
}

func TestCluster_ownerReturnsToNodeWithStaleMemory(t *testing.T) {
	tc := newTestCluster(t, 2, true)
	kv := map[string]string{"tenant": "t3", "user": "u9"}
	owner := tc.nodes["node-0"].cluster.owner("t3")
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

func TestCluster_partitionedOwnerFallsBackWithinDeadline(t *testing.T) {
	tc := newTestCluster(t, 3, false)
	owner := tc.nodes["node-0"].cluster.owner("t5")
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

func TestCluster_strictLimitIsDecidedByRedisExactly(t *testing.T) {
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

func TestCluster_breakerTurnsDeadOwnerIntoFastFallback(t *testing.T) {
	tc := newTestCluster(t, 2, false)
	owner := tc.nodes["node-0"].cluster.owner("t9")
	other := "node-0"
	if owner == other {
		other = "node-1"
	}
	bcfg := breaker.DefaultConfig()
	set, err := breaker.NewSet(bcfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tc.nodes[other].cluster.deps.Breakers = set
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
	tc.nodes[other].cluster.deps.Forwarder = timeoutForwarder{tc.net.Forwarder(other), 5 * time.Millisecond}
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

func (f timeoutForwarder) Decide(ctx context.Context, addr string, it peer.Item) (peer.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	return f.Forwarder.Decide(ctx, addr, it)
}

// A paused Redis must not make a healthy owner look unreachable: the owner
// answers a forwarded batch before the sender's deadline, deciding what it
// holds in memory and failing only the item that needed Redis.
func TestCluster_slowRedisOwnerStillAnswersInTime(t *testing.T) {
	tc := newTestCluster(t, 2, true)
	owner := tc.nodes["node-0"].cluster.owner("t1")
	node := tc.nodes[owner].cluster
	hot := map[string]string{"tenant": "t1", "user": "u1"}
	if d := tc.decide(owner, hot); d.Fallback != nil || !d.Allowed {
		t.Fatalf("warm-up: %+v", d)
	}
	item := func(user string) peer.Item {
		keys := []string{"weir:{t1}:per-user:t1:" + user, "weir:{t1}:per-tenant:t1"}
		return peer.Item{Group: "t1", Keys: keys, Limits: []gcra.Limit{perUser, {Interval: 10_000_000, Burst: 20}},
			Cost: 1, Now: tc.clock.Nanos()}
	}
	tc.redis.Pause()
	defer tc.redis.Resume()

	// The owner's own Redis budget is far away, so only the sender's
	// deadline can end the load. That deadline is generous so that
	// scheduling noise on a busy machine cannot eat the quarter the owner
	// leaves for the reply (500ms here): 10ms and 100ms to spare were both
	// eaten under load.
	node.cfg.LoadTimeout = time.Minute
	const deadline = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	rs := node.HandleDecide(ctx, "node-x", []peer.Item{item("cold"), item("u1")})
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

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

// The small side of a split keeps deciding the groups it holds in memory
// while the other side, having declared it dead, decides them from Redis.
// When the split heals, the node that was cut off must reload, not resume
// from its own older TATs.
func TestCluster_cutOffOwnerReloadsWhenTheSplitHeals(t *testing.T) {
	tc := newTestCluster(t, 3, true)
	ctx := context.Background()
	kv := map[string]string{"tenant": "t4", "user": "u1"}
	owner := tc.nodes["node-0"].cluster.owner("t4")
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
	tc.nodes[owner].cluster.SetMembersFailed(ctx, map[string]string{owner: owner}, others)
	for _, name := range others {
		tc.nodes[name].cluster.SetMembersFailed(ctx, majority, []string{owner})
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
	if slack := int(DefaultConfig().PersistSlack); admitted < 4 || admitted > 4+slack {
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
	if got := testutil.ToFloat64(tc.nodes[owner].cluster.metrics.rejoins); got != 1 {
		t.Fatalf("weir_rejoins_total = %v, want 1", got)
	}
	for _, name := range others {
		if got := testutil.ToFloat64(tc.nodes[name].cluster.metrics.rejoins); got != 0 {
			t.Fatalf("%s, on the majority side, counted a rejoin", name)
		}
	}
}
