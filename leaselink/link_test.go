package leaselink

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weirhq/weir/clock/clocktest"
	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/lease"
	"github.com/weirhq/weir/peer"
)

// fakeRoutes knows n members, each at an address equal to its name.
type fakeRoutes int

func (r fakeRoutes) Addr(name string) string { return name }
func (r fakeRoutes) Members() int            { return int(r) }

// refusingLeaser answers no refresh.
type refusingLeaser struct{}

func (refusingLeaser) Lease(context.Context, string, lease.Refresh) ([]peer.LeaseAnswer, error) {
	return nil, errors.New("no owner here")
}

func newTestLink(t testing.TB, members int) *Link {
	t.Helper()
	cfg := DefaultConfig()
	cfg.LocalName, cfg.Holder.Name = "a", "a#1"
	l, err := New(cfg, Deps{Leaser: refusingLeaser{}, Routes: fakeRoutes(members), Clock: clocktest.NewManual(time.Unix(1_700_000_000, 0))}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

var (
	terms    = &lease.Terms{Max: 20, TTL: 250 * time.Millisecond}
	bigLimit = gcra.Limit{Interval: 1_000_000, Burst: 100}
)

// refs decides leasability from the request's Defs alone: every limit
// leasable (terms, fast, enforced) and big enough for the cluster.
func TestLink_refs_readsDefs(t *testing.T) {
	l := newTestLink(t, 3)
	leasable := &decide.Def{Name: "hot", Lease: terms}
	for _, tc := range []struct {
		name   string
		defs   []*decide.Def
		limit  gcra.Limit
		strict bool
		want   bool
	}{
		{"leasable", []*decide.Def{leasable}, bigLimit, false, true},
		{"no Defs (not validated)", nil, bigLimit, false, false},
		{"no lease terms", []*decide.Def{{Name: "x"}}, bigLimit, false, false},
		{"shadow", []*decide.Def{{Name: "x", Lease: terms, Shadow: true}}, bigLimit, false, false},
		{"strict limit", []*decide.Def{{Name: "x", Lease: terms, Strict: true}}, bigLimit, false, false},
		{"strict request", []*decide.Def{leasable}, bigLimit, true, false},
		{"burst too small for 3 nodes", []*decide.Def{leasable}, gcra.Limit{Interval: 1_000_000, Burst: 11}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &decide.Request{Group: "t1", Keys: []string{"weir:{t1}:hot:t1"}, Limits: []gcra.Limit{tc.limit}, Defs: tc.defs, Cost: 1, Strict: tc.strict}
			refs, ok := l.refs(r, "b", nil)
			if ok != tc.want {
				t.Fatalf("refs ok = %v, want %v", ok, tc.want)
			}
			if ok && (len(refs) != 1 || refs[0].Label != "hot" || refs[0].Terms != *terms || refs[0].Owner != "b") {
				t.Fatalf("refs %+v: want the Def's name and terms, owned by b", refs)
			}
		})
	}
}

// A request nothing was ever leased for is not decided from leases, and
// marks nothing as from a lease.
func TestLink_Spend_withoutLeasesForwards(t *testing.T) {
	l := newTestLink(t, 2)
	r := &decide.Request{Group: "t1", Keys: []string{"weir:{t1}:hot:t1"}, Limits: []gcra.Limit{bigLimit},
		Defs: []*decide.Def{{Name: "hot", Lease: terms}}, Cost: 1}
	if _, ok := l.Spend(t.Context(), r, decide.Route{Owner: "b", Addr: "b"}, make([]gcra.Result, 1), noBudget{}); ok || r.FromLease {
		t.Fatalf("decided from leases it does not hold: ok %v, from lease %v", ok, r.FromLease)
	}
}

// noBudget leaves no time to wait for an owner.
type noBudget struct{}

func (noBudget) Budget(context.Context, string) time.Duration { return 0 }

func TestConfig_Validate_refusesBadValues(t *testing.T) {
	good := DefaultConfig()
	good.LocalName, good.Holder.Name = "a", "a#1"
	if err := good.Validate(); err != nil {
		t.Fatalf("defaults with names: %v", err)
	}
	for name, mutate := range map[string]func(*Config){
		"no local name":   func(c *Config) { c.LocalName = "" },
		"no holder name":  func(c *Config) { c.Holder.Name = "" },
		"zero tick":       func(c *Config) { c.Tick = 0 },
		"negative sweep":  func(c *Config) { c.SweepEvery = -time.Second },
		"zero rpc budget": func(c *Config) { c.RPCTimeout = 0 },
	} {
		c := good
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// BenchmarkLink_refs_noLeases (was BenchmarkCluster_leaseRefs_noLeases) is
// the lease check alone that every forwarded decision makes, on a request
// whose limits lease nothing.
func BenchmarkLink_refs_noLeases(b *testing.B) {
	l := newTestLink(b, 2)
	r := &decide.Request{Group: "t1", Keys: []string{"weir:{t1}:per-user:t1:u1", "weir:{t1}:per-tenant:t1"},
		Limits: []gcra.Limit{{Interval: 20_000_000, Burst: 5}, {Interval: 10_000_000, Burst: 20}},
		Defs:   []*decide.Def{{Name: "per-user"}, {Name: "per-tenant"}}, Cost: 1}
	var buf [8]lease.Ref
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := l.refs(r, "node-1", buf[:0]); ok {
			b.Fatal("leasable without lease terms")
		}
	}
}

func TestGrantConfig_Validate_refusesBadValues(t *testing.T) {
	good := DefaultGrantConfig()
	good.Grantor.Name = "a#1"
	if err := good.Validate(); err != nil {
		t.Fatalf("defaults with a name: %v", err)
	}
	for name, mutate := range map[string]func(*GrantConfig){
		"no name":            func(c *GrantConfig) { c.Grantor.Name = "" },
		"zero write timeout": func(c *GrantConfig) { c.WriteTimeout = 0 },
	} {
		c := good
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if _, err := NewGrants(c, nil, nil, nil); err == nil {
			t.Errorf("%s: NewGrants accepted it", name)
		}
	}
}

// With no key tracked, Run waits SweepEvery between ticks, not Tick: a
// node without leasable traffic wakes once a second. A Spend on a leasable
// key wakes it at once, and it ticks every Tick while the key is tracked.
func TestLink_Run_sleepsWhileNothingIsTracked(t *testing.T) {
	l := newTestLink(t, 2)
	clk := l.clk.(*clocktest.Manual)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	next := func() time.Duration { // the pause Run armed after its tick
		t.Helper()
		wctx, wcancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer wcancel()
		if err := clk.WaitForTimers(wctx, 1); err != nil {
			t.Fatal(err)
		}
		return clk.Timers()[0].Sub(clk.Now())
	}
	if d := next(); d != l.cfg.Tick {
		t.Fatalf("first pause %s, want Tick %s", d, l.cfg.Tick)
	}
	clk.Advance(l.cfg.Tick)
	waitUntil(t, "Run to sleep", l.sleeping.Load)
	if d := next(); d != l.cfg.SweepEvery {
		t.Fatalf("nothing tracked: pause %s, want SweepEvery %s", d, l.cfg.SweepEvery)
	}
	r := &decide.Request{Group: "t1", Keys: []string{"weir:{t1}:hot:t1"}, Limits: []gcra.Limit{bigLimit},
		Defs: []*decide.Def{{Name: "hot", Lease: terms}}, Cost: 1}
	l.Spend(t.Context(), r, decide.Route{Owner: "b", Addr: "b"}, make([]gcra.Result, 1), noBudget{})
	waitUntil(t, "the Spend to wake Run", func() bool {
		ts := clk.Timers()
		return !l.sleeping.Load() && len(ts) == 1 && ts[0].Sub(clk.Now()) == l.cfg.Tick
	})
}

// waitUntil polls cond until it holds, failing the test after 10s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
