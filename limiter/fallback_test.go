package limiter

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/policy"
)

const fallbackPolicy = `
version: fb
limits:
  - {name: capacity, match: [tenant, api], rate: 100/s, burst: 10, on_failure: open}
  - {name: login, match: [tenant, login], rate: 1/s, burst: 5, on_failure: closed}
  - {name: api, match: [route, tenant], rate: 1000/s, burst: 200, consistency: strict,
     on_failure: local, fallback_rate: 2/s, fallback_burst: 2}
`

// downStore is a store whose dependency is gone.
type downStore struct{ strict []bool }

func (s *downStore) Decide(_ context.Context, r *decide.Request, _ []gcra.Result) (gcra.Result, error) {
	s.strict = append(s.strict, r.Strict)
	return gcra.Result{}, &UnavailableError{Reason: "redis_unavailable", Err: errors.New("dial tcp: connection refused")}
}

func newDownLimiter(t *testing.T) (*Limiter, *downStore) {
	t.Helper()
	lim, s, _ := newDownLimiterConfig(t, DefaultConfig())
	return lim, s
}

// newDownLimiterConfig is newDownLimiter with cfg, and returns its clock.
func newDownLimiterConfig(t *testing.T, cfg Config) (*Limiter, *downStore, *fakeClock) {
	t.Helper()
	p, err := policy.Parse("fb.yaml", []byte(fallbackPolicy))
	if err != nil {
		t.Fatal(err)
	}
	s := &downStore{}
	clock := &fakeClock{now: time.UnixMicro(1_700_000_000_000_000)}
	lim, err := New(cfg, policy.Static(p), s, nil, prometheus.NewRegistry(), WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	return lim, s, clock
}

func TestLimiter_Decide_failOpenAllowsAndFlags(t *testing.T) {
	lim, _ := newDownLimiter(t)
	d, err := lim.Decide(context.Background(), Request{Descriptors: desc("tenant", "a", "api", "x"), Cost: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Allowed || d.Fallback == nil || d.Fallback.Mode != "open" || d.Fallback.Reason != "redis_unavailable" {
		t.Fatalf("%+v", d)
	}
	if got := testutil.ToFloat64(lim.metrics.fallbacks.WithLabelValues("capacity", "redis_unavailable", "open")); got != 1 {
		t.Fatalf("fallback counter %v", got)
	}
}

func TestLimiter_Decide_failClosedDeniesWithEstimate(t *testing.T) {
	lim, _ := newDownLimiter(t)
	d, err := lim.Decide(context.Background(), Request{Descriptors: desc("tenant", "a", "login", "u"), Cost: 2})
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed || d.Fallback == nil || d.Fallback.Mode != "closed" || d.RetryAfter != 2*time.Second {
		t.Fatalf("%+v", d)
	}
}

func TestLimiter_Decide_failLocalAdmitsAtFallbackRate(t *testing.T) {
	lim, s := newDownLimiter(t)
	var admitted int
	for range 5 {
		d, err := lim.Decide(context.Background(), Request{Descriptors: desc("tenant", "a", "route", "/r"), Cost: 1})
		if err != nil {
			t.Fatal(err)
		}
		if d.Fallback == nil || d.Fallback.Mode != "local" {
			t.Fatalf("%+v", d)
		}
		if d.Allowed {
			admitted++
		}
	}
	if admitted != 2 {
		t.Fatalf("admitted %d at one instant, want the fallback burst 2", admitted)
	}
	if len(s.strict) == 0 || !s.strict[0] {
		t.Fatal("strict limit was not sent as a strict store request")
	}
}

func TestLimiter_Decide_cancelledCallerGetsErrorNotFallback(t *testing.T) {
	lim, _ := newDownLimiter(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := lim.Decide(ctx, Request{Descriptors: desc("tenant", "a", "api", "x"), Cost: 1}); err == nil {
		t.Fatal("a caller that gave up got a fallback decision")
	}
}

func TestLimiter_Decide_failLocalFullDeniesAsClosed(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FallbackMaxKeys = 2
	lim, _, clock := newDownLimiterConfig(t, cfg)
	decide := func(tenant string) Decision {
		t.Helper()
		d, err := lim.Decide(context.Background(), Request{Descriptors: desc("tenant", tenant, "route", "/r"), Cost: 1})
		if err != nil {
			t.Fatal(err)
		}
		if d.Fallback == nil {
			t.Fatalf("%s: no fallback flag: %+v", tenant, d)
		}
		return d
	}
	// Two keys of one group (the route; one shard of the state) fill the
	// local state; both stay live (TAT 500ms ahead).
	for _, tenant := range []string{"a", "b"} {
		if d := decide(tenant); !d.Allowed || d.Fallback.Mode != "local" {
			t.Fatalf("%s: %+v, want admitted locally", tenant, d)
		}
	}
	// A third key finds no room: denied as a closed limit would be, with
	// the fallback rate's time to earn the cost (2/s: 500ms).
	d := decide("c")
	if d.Allowed || d.Fallback.Mode != "closed" || d.RetryAfter != 500*time.Millisecond {
		t.Fatalf("c with the local state full: %+v, want denied as closed after 500ms", d)
	}
	if d.Limits[0].Allowed || d.Limits[0].RetryAfter != 500*time.Millisecond {
		t.Fatalf("c limit decision %+v", d.Limits[0])
	}
	if got := testutil.ToFloat64(lim.metrics.fallbacks.WithLabelValues("api", "redis_unavailable", "closed")); got != 1 {
		t.Fatalf("closed fallback counter %v, want 1", got)
	}
	// A held key is still decided locally, at its own state.
	if d := decide("a"); !d.Allowed || d.Fallback.Mode != "local" || d.Limits[0].Remaining != 0 {
		t.Fatalf("a again: %+v, want admitted locally with its burst spent", d)
	}
	// Once the held keys rest they are evicted to make room.
	clock.Add(2 * time.Second)
	if d := decide("c"); !d.Allowed || d.Fallback.Mode != "local" {
		t.Fatalf("c after the others rested: %+v, want admitted locally", d)
	}
	if n := lim.local.Len(); n > 2 {
		t.Fatalf("local state holds %d keys, cap 2", n)
	}
}

func TestConfig_Validate_fallbackMaxKeys(t *testing.T) {
	c := DefaultConfig()
	c.FallbackMaxKeys = -1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "fallback max keys") {
		t.Fatalf("Validate = %v, want a fallback max keys error", err)
	}
	if c.FallbackMaxKeys != -1 {
		t.Fatal("Validate changed the config")
	}
}
