package limiter

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/policy"
)

const testPolicy = `
version: test-1
limits:
  - name: per-user
    match: [tenant, user]
    group: tenant
    rate: 5/s
    burst: 3
  - name: per-tenant
    match: [tenant]
    rate: 100/s
    burst: 50
  - name: per-route-shadow
    match: [tenant, route]
    rate: 1/s
    burst: 1
    shadow: true
  - name: per-ip
    match: [ip]
    rate: 10/s
    burst: 10
`

// fakeClock is a settable clock; tests move it explicitly and never sleep.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

type fixture struct {
	lim   *Limiter
	store *memstore.Store
	clock *fakeClock
	reg   *prometheus.Registry
}

func newFixture(t testing.TB, yaml string) *fixture {
	t.Helper()
	p, err := policy.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{store: memstore.New(memstore.DefaultConfig()), clock: &fakeClock{now: time.UnixMicro(1_700_000_000_000_000)}, reg: prometheus.NewRegistry()}
	f.lim, err = New(DefaultConfig(), policy.Static(p), MemoryStore(f.store), nil, f.reg, WithClock(f.clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) decide(t *testing.T, cost int64, kv ...string) Decision {
	t.Helper()
	d, err := f.lim.Decide(context.Background(), Request{Descriptors: desc(kv...), Cost: cost})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func desc(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func TestLimiter_Decide_seedHandTrace(t *testing.T) {
	f := newFixture(t, testPolicy)
	type step struct {
		at        time.Duration
		allowed   bool
		remaining int64
		retry     time.Duration
	}
	start := f.clock.Now()
	for i, s := range []step{
		{0, true, 2, 0}, {0, true, 1, 0}, {0, true, 0, 0}, {0, false, 0, 200 * time.Millisecond},
		{250 * time.Millisecond, true, 0, 0}, {250 * time.Millisecond, false, 0, 150 * time.Millisecond},
	} {
		f.clock.now = start.Add(s.at)
		d := f.decide(t, 1, "tenant", "acme", "user", "u7")
		if d.Allowed != s.allowed || d.Remaining != s.remaining || d.RetryAfter != s.retry {
			t.Fatalf("step %d: allowed=%v remaining=%d retry=%s; want %v %d %s", i, d.Allowed, d.Remaining, d.RetryAfter, s.allowed, s.remaining, s.retry)
		}
		if len(d.Limits) != 2 || d.Limits[0].Name != "per-user" || d.Limits[1].Name != "per-tenant" {
			t.Fatalf("limits %+v", d.Limits)
		}
	}
	if d := f.decide(t, 1, "tenant", "acme", "user", "u7"); d.Limits[0].Key != "weir:{acme}:per-user:acme:u7" || d.Limits[0].Window != 600*time.Millisecond || d.Limits[0].Burst != 3 {
		t.Fatalf("limit decision %+v", d.Limits[0])
	}
}

func TestLimiter_Decide_compositeDenialConsumesNothing(t *testing.T) {
	f := newFixture(t, testPolicy)
	for range 3 {
		f.decide(t, 1, "tenant", "acme", "user", "u1")
	}
	d := f.decide(t, 1, "tenant", "acme", "user", "u1")
	if d.Allowed {
		t.Fatal("fourth request admitted")
	}
	// per-tenant saw three admitted units only: 47 left.
	if d.Limits[1].Remaining != 47 || !d.Limits[1].Allowed {
		t.Fatalf("per-tenant after a denied composite: %+v", d.Limits[1])
	}
	if got := testutil.ToFloat64(f.lim.metrics.decisions.WithLabelValues("per-user", "denied")); got != 1 {
		t.Fatalf("denied counter %v", got)
	}
}

func TestLimiter_Decide_shadowNeverDenies(t *testing.T) {
	f := newFixture(t, testPolicy)
	d1 := f.decide(t, 1, "tenant", "acme", "route", "/x")
	d2 := f.decide(t, 1, "tenant", "acme", "route", "/x")
	if !d1.Allowed || !d2.Allowed {
		t.Fatal("a shadow limit denied")
	}
	sh := d2.Limits[1]
	if sh.Name != "per-route-shadow" || !sh.Shadow || sh.Allowed || sh.RetryAfter != time.Second {
		t.Fatalf("shadow limit should report would-deny with retry 1s: %+v", sh)
	}
	if got := testutil.ToFloat64(f.lim.metrics.decisions.WithLabelValues("per-route-shadow", "shadow_denied")); got != 1 {
		t.Fatalf("shadow_denied counter %v", got)
	}
}

func TestLimiter_Decide_noMatchIsAllowed(t *testing.T) {
	f := newFixture(t, testPolicy)
	d := f.decide(t, 1, "user", "u1") // per-user needs tenant too
	if !d.Allowed || d.Matched || len(d.Limits) != 0 || d.PolicyVersion != "test-1" {
		t.Fatalf("%+v", d)
	}
}

func TestLimiter_Decide_tooCostly(t *testing.T) {
	f := newFixture(t, testPolicy)
	d := f.decide(t, 4, "tenant", "acme", "user", "u1")
	if d.Allowed || !d.TooCostly || d.RetryAfter != 0 {
		t.Fatalf("%+v", d)
	}
	if f.store.Len() != 0 {
		t.Fatal("too-costly request consumed quota")
	}
}

func TestLimiter_Decide_badInputChangesNothing(t *testing.T) {
	f := newFixture(t, testPolicy)
	many := map[string]string{}
	for i := range MaxDescriptors + 1 {
		many[strings.Repeat("d", i+1)] = "v"
	}
	long := strings.Repeat("x", MaxDescriptorBytes+1)
	for name, r := range map[string]Request{
		"negative cost":      {Descriptors: desc("tenant", "a"), Cost: -1},
		"zero cost":          {Descriptors: desc("tenant", "a"), Cost: 0},
		"huge cost":          {Descriptors: desc("tenant", "a"), Cost: MaxCost + 1},
		"too many":           {Descriptors: many, Cost: 1},
		"long value":         {Descriptors: desc("tenant", long), Cost: 1},
		"long name":          {Descriptors: desc(long, "a"), Cost: 1},
		"empty name":         {Descriptors: desc("", "a"), Cost: 1},
		"bad utf8":           {Descriptors: desc("tenant", "\xff"), Cost: 1},
		"unknown descriptor": {Descriptors: desc("tenant", "a", "colour", "red"), Cost: 1},
		"groups differ":      {Descriptors: desc("tenant", "a", "ip", "1.2.3.4"), Cost: 1},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := f.lim.Decide(context.Background(), r)
			if !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("got %v, want ErrInvalidRequest", err)
			}
			if f.store.Len() != 0 {
				t.Fatal("bad input changed state")
			}
		})
	}
}

func TestLimiter_DecideBatch_validatesEverythingFirst(t *testing.T) {
	f := newFixture(t, testPolicy)
	rs := []Request{
		{Descriptors: desc("tenant", "a", "user", "1"), Cost: 1},
		{Descriptors: desc("tenant", "a", "nope", "1"), Cost: 1},
	}
	_, err := f.lim.DecideBatch(context.Background(), rs)
	if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), "requests[1]") {
		t.Fatalf("got %v", err)
	}
	if f.store.Len() != 0 {
		t.Fatal("a rejected batch consumed quota")
	}
	ds, err := f.lim.DecideBatch(context.Background(), rs[:1])
	if err != nil || len(ds) != 1 || !ds[0].Allowed {
		t.Fatalf("%+v %v", ds, err)
	}
	if _, err := f.lim.DecideBatch(context.Background(), make([]Request, MaxBatch+1)); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("oversized batch: %v", err)
	}
}

type failingStore struct{}

func (failingStore) Decide(context.Context, *decide.Request, []gcra.Result) (gcra.Result, error) {
	return gcra.Result{}, errors.New("redis: connection refused")
}

func TestLimiter_Decide_storeErrorIsReportedAndCounted(t *testing.T) {
	p, _ := policy.Parse("test.yaml", []byte(testPolicy))
	lim, err := New(DefaultConfig(), policy.Static(p), failingStore{}, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	_, err = lim.Decide(context.Background(), Request{Descriptors: desc("tenant", "a"), Cost: 1})
	if err == nil || errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("got %v, want a store error", err)
	}
	if got := testutil.ToFloat64(lim.metrics.storeErrors); got != 1 {
		t.Fatalf("store errors %v", got)
	}
}
