package forward

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/lease"
	"github.com/weirhq/weir/leaselink"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/metrictest"
	"github.com/weirhq/weir/owner"
	"github.com/weirhq/weir/peer"
	"github.com/weirhq/weir/peer/peertest"
	"github.com/weirhq/weir/policy"
	"github.com/weirhq/weir/redisbackend"
	"github.com/weirhq/weir/redisbackend/redistest"
	"github.com/weirhq/weir/ring"
	"github.com/weirhq/weir/writebehind"
)

// The in-process cluster these tests run: per node the layers cmd/node
// wires (routes, owner on the in-memory peer network, router, and
// optionally the lease holder), a limiter over the router, and
// one shared fake clock as the nodes' time base.

const testPolicy = `
version: cluster-test
limits:
  - {name: per-user, match: [tenant, user], group: tenant, rate: 50/s, burst: 5}
  - {name: per-tenant, match: [tenant], rate: 100/s, burst: 20}
  - {name: strict-account, match: [org, account], group: org, rate: 1/m, burst: 5, consistency: strict}
`

// testClock is the one time base every test node shares: Now is set by
// hand (Add); durations and timers are the real clock's, as the node's
// Redis time base is (cmd/node's timeBase).
type testClock struct {
	mu  sync.Mutex
	now int64
}

var _ clock.Clock = (*testClock)(nil)

func (c *testClock) Now() time.Time                         { c.mu.Lock(); defer c.mu.Unlock(); return time.Unix(0, c.now) }
func (c *testClock) Since(t time.Time) time.Duration        { return c.Now().Sub(t) }
func (c *testClock) NewTimer(d time.Duration) clock.Timer   { return clock.Real().NewTimer(d) }
func (c *testClock) NewTicker(d time.Duration) clock.Ticker { return clock.Real().NewTicker(d) }
func (c *testClock) Nanos() int64                           { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) Add(d time.Duration)                    { c.mu.Lock(); c.now += int64(d); c.mu.Unlock() }
func newClock() *testClock                                  { return &testClock{now: time.Now().UnixNano()} }
func (c *testClock) nowFunc() func() int64                  { return c.Nanos }

// hookRedis is the owner's Redis with a hook run after every load.
type hookRedis struct {
	owner.Redis
	mu     sync.Mutex
	onLoad func(ctx context.Context)
}

func (h *hookRedis) LoadTATs(ctx context.Context, keys []string) ([]int64, error) {
	tats, err := h.Redis.LoadTATs(ctx, keys)
	h.mu.Lock()
	hook := h.onLoad
	h.mu.Unlock()
	if hook != nil {
		hook(ctx)
	}
	return tats, err
}

func (h *hookRedis) setOnLoad(f func(ctx context.Context)) { h.mu.Lock(); h.onLoad = f; h.mu.Unlock() }

type testNode struct {
	name   string
	router *Router
	owner  *owner.Owner
	leases *leaselink.Link   // nil unless the cluster leases
	grants *leaselink.Grants // nil unless the cluster leases
	routes *Routes
	mem    *memstore.Store
	redis  *hookRedis // nil without Redis
	lim    *limiter.Limiter
	wb     *writebehind.Writer
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan struct{}
}

type testCluster struct {
	t      testing.TB
	net    *peertest.Network
	clock  *testClock
	pol    *policy.Policy
	redis  *redistest.Server // nil: no Redis
	nodes  map[string]*testNode
	member map[string]string
	// ownerClock, if set, is every owner's Clock (freeze detection);
	// otherwise the real one. ownerCfg, if set, adjusts each owner's
	// Config; wrapWB the write-behind an owner flushes through.
	ownerClock clock.Clock
	ownerCfg   func(*owner.Config)
	wrapWB     func(owner.WriteBehind) owner.WriteBehind
	// leasing nodes grant and hold leases (leaseCluster).
	leasing bool
}

func newTestCluster(t testing.TB, n int, withRedis bool) *testCluster {
	t.Helper()
	return newTestClusterWith(t, n, withRedis, nil)
}

// newTestClusterWith is newTestCluster with opt applied before any node
// is built.
func newTestClusterWith(t testing.TB, n int, withRedis bool, opt func(*testCluster)) *testCluster {
	t.Helper()
	pol, err := policy.Parse("test.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	tc := &testCluster{t: t, net: peertest.NewNetwork(), clock: newClock(), pol: pol, nodes: map[string]*testNode{}, member: map[string]string{}}
	if opt != nil {
		opt(tc)
	}
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
	node := &testNode{name: name, done: make(chan struct{}), mem: memstore.New(memstore.DefaultConfig()), reg: prometheus.NewRegistry()}
	node.routes = NewRoutes(name, r)
	deps := owner.Deps{Ring: node.routes, Mem: node.mem, Clock: tc.ownerClock}
	ctx, cancel := context.WithCancel(context.Background())
	node.cancel = cancel
	if tc.redis != nil {
		client := redis.NewClient(&redis.Options{Addr: tc.redis.Addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { client.Close() })
		b, err := redisbackend.New(client, redisbackend.Config{Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		node.wb, err = writebehind.New(writebehind.DefaultConfig(), b, tc.clock.nowFunc(), nil, prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		// A generous strict budget: these tests judge decisions, not
		// latency, and a loaded machine under -race overran the 20ms
		// default.
		q, err := redisbackend.NewStrictQueue(b, time.Second, 256)
		if err != nil {
			t.Fatal(err)
		}
		node.redis = &hookRedis{Redis: b}
		var wb owner.WriteBehind = node.wb
		if tc.wrapWB != nil {
			wb = tc.wrapWB(wb)
		}
		deps.Redis, deps.Strict, deps.WriteBehind = node.redis, q, wb
		go func() { node.wb.Run(ctx); close(node.done) }()
	} else {
		close(node.done)
	}
	ocfg := owner.DefaultConfig()
	ocfg.LocalName = name
	ocfg.LoadTimeout = time.Second // generous, as the strict budget
	if tc.ownerCfg != nil {
		tc.ownerCfg(&ocfg)
	}
	if node.owner, err = owner.New(ocfg, deps, nil, node.reg); err != nil {
		t.Fatal(err)
	}
	if tc.leasing {
		tc.enableLeases(node)
	}
	fdeps := Deps{Routes: node.routes, Forwarder: tc.net.Forwarder(name), Owner: node.owner}
	if node.leases != nil {
		fdeps.Leases = node.leases
	}
	if node.router, err = New(DefaultConfig(), fdeps, nil, node.reg); err != nil {
		t.Fatal(err)
	}
	node.lim, err = limiter.New(limiter.DefaultConfig(), policy.Static(tc.pol), node.router, nil, prometheus.NewRegistry(), limiter.WithClock(tc.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	// The bare owner answers the in-memory network, as cluster/'s tests had
	// it (and its benchmarks measured): these policies have no global
	// limits, and lease requests carry their terms. debt_forged_test.go
	// puts the Validator in front, as the peer server does.
	if node.grants != nil {
		tc.net.Register(name, ownerSide{node.owner, node.grants})
	} else {
		tc.net.Register(name, node.owner)
	}
	tc.nodes[name] = node
	tc.member[name] = name // the in-memory network addresses nodes by name
	t.Cleanup(func() { cancel(); <-node.done })
	return node
}

// enableLeases turns on both sides of leases on node, as cmd/node does,
// on the shared clock.
func (tc *testCluster) enableLeases(node *testNode) {
	gcfg := leaselink.GrantConfig{Grantor: leaseGrantorConfig(node.name), WriteTimeout: 50 * time.Millisecond}
	g, err := leaselink.NewGrants(gcfg, node.owner, tc.clock, node.reg)
	if err != nil {
		tc.t.Fatal(err)
	}
	node.grants = g
	node.owner.EnableLeases(g)
	hcfg := leaselink.DefaultConfig()
	hcfg.LocalName, hcfg.Holder.Name = node.name, node.name+"#1"
	l, err := leaselink.New(hcfg, leaselink.Deps{Leaser: tc.net.Leaser(node.name), Routes: node.routes, Grants: g, Clock: tc.clock}, nil, node.reg)
	if err != nil {
		tc.t.Fatal(err)
	}
	node.leases = l
}

// sync gives every node the current membership, as gossip would.
func (tc *testCluster) sync() {
	for _, n := range tc.nodes {
		n.router.SetMembers(context.Background(), tc.member)
	}
}

// remove takes a node out gracefully: it hands off, then the others learn.
func (tc *testCluster) remove(name string) {
	n := tc.nodes[name]
	n.router.Handoff(context.Background())
	delete(tc.nodes, name)
	delete(tc.member, name)
	tc.net.Unregister(name)
	tc.sync()
}

// owner is group's owner as the first node's ring says.
func (tc *testCluster) owner(group string) string {
	for _, n := range tc.nodes {
		return n.routes.Owner(group)
	}
	return ""
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

// metric reads one counter or gauge of node's registry by its labels
// (name, value pairs); 0 when absent.
func (tc *testCluster) metric(node, name string, labels ...string) float64 {
	tc.t.Helper()
	return metrictest.Value(tc.t, tc.nodes[node].reg, name, labels...)
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

// ownerDefaults is owner.DefaultConfig, for tests whose variables are
// called owner.
func ownerDefaults() owner.Config { return owner.DefaultConfig() }

// ownerSide is a node's owner with its lease grants, as the node's peer
// server answers (cmd/node's ownerSide).
type ownerSide struct {
	*owner.Owner
	grants *leaselink.Grants
}

func (s ownerSide) HandleLease(ctx context.Context, from string, r lease.Refresh) []peer.LeaseAnswer {
	return s.grants.HandleLease(ctx, from, r)
}
