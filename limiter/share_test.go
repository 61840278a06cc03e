package limiter

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/policy"
)

const sharePolicy = `
version: share
limits:
  - {name: shared, match: [tenant, user], group: tenant, rate: 10/s, burst: 5}
  - {name: opened, match: [tenant, api], group: tenant, rate: 10/s, burst: 5, on_failure: open}
  - {name: closed, match: [tenant, login], group: tenant, rate: 10/s, burst: 5, on_failure: closed}
  - {name: account, match: [org, account], group: org, rate: 1/s, burst: 5, consistency: strict}
`

// debtStore is a store whose dependency is gone and which records the
// fallback admissions the limiter reports to it.
type debtStore struct {
	downStore
	debts []recordedDebt
}

type recordedDebt struct {
	group  string
	keys   []string
	limits []gcra.Limit
	cost   int64
}

func (s *debtStore) RecordFallback(group string, keys []string, limits []gcra.Limit, cost int64) {
	s.debts = append(s.debts, recordedDebt{group, slices.Clone(keys), slices.Clone(limits), cost})
}

func newShareLimiter(t *testing.T, opts ...Option) (*Limiter, *debtStore) {
	t.Helper()
	p, err := policy.Parse("share.yaml", []byte(sharePolicy))
	if err != nil {
		t.Fatal(err)
	}
	s := &debtStore{}
	clock := &fakeClock{now: time.UnixMicro(1_700_000_000_000_000)}
	lim, err := New(DefaultConfig(), policy.Static(p), s, nil, prometheus.NewRegistry(), append(opts, WithClock(clock.Now))...)
	if err != nil {
		t.Fatal(err)
	}
	return lim, s
}

// admitAll decides n requests at one instant and counts the admitted.
func admitAll(t *testing.T, lim *Limiter, n int, kv ...string) int {
	t.Helper()
	admitted := 0
	for range n {
		d, err := lim.Decide(context.Background(), Request{Descriptors: desc(kv...), Cost: 1})
		if err != nil {
			t.Fatal(err)
		}
		if d.Fallback == nil || d.Fallback.Mode != "local" || d.Fallback.Reason != "redis_unavailable" {
			t.Fatalf("fallback = %+v, want local/redis_unavailable", d.Fallback)
		}
		if d.Allowed {
			admitted++
		}
	}
	return admitted
}

func TestLimiter_defaultFallbackIsTheNodesShare(t *testing.T) {
	lim, _ := newShareLimiter(t)
	if got := admitAll(t, lim, 10, "tenant", "a", "user", "1"); got != 5 {
		t.Errorf("a lone node admitted %d at once, want the whole burst 5", got)
	}
	var members atomic.Int64
	members.Store(2)
	lim, _ = newShareLimiter(t, WithMembers(func() int { return int(members.Load()) }))
	if got := admitAll(t, lim, 10, "tenant", "a", "user", "1"); got != 3 {
		t.Errorf("one of 2 nodes admitted %d at once, want ceil(5/2) = 3", got)
	}
	members.Store(5) // membership grew: the share follows
	if got := admitAll(t, lim, 10, "tenant", "a", "user", "2"); got != 1 {
		t.Errorf("one of 5 nodes admitted %d at once, want 1", got)
	}
	d, err := lim.Decide(context.Background(), Request{Descriptors: desc("tenant", "a", "user", "3"), Cost: 1})
	if err != nil || d.Limits[0].Burst != 1 || d.Limits[0].Window != 500*time.Millisecond {
		t.Errorf("the response describes %+v (%v), want the share: burst 1 over 500ms", d.Limits, err)
	}
	if got := testutil.ToFloat64(lim.metrics.fallbacks.WithLabelValues("shared", "redis_unavailable", "local")); got != 21 {
		t.Errorf("fallback counter = %v, want 21", got)
	}
}

func TestLimiter_fallbackAdmissionsAreReportedAsDebt(t *testing.T) {
	lim, s := newShareLimiter(t)
	ctx := context.Background()
	for range 7 { // 5 admitted by the local share, 2 denied
		if _, err := lim.Decide(ctx, Request{Descriptors: desc("tenant", "a", "user", "1"), Cost: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := lim.Decide(ctx, Request{Descriptors: desc("tenant", "a", "api", "x"), Cost: 3}); err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][]string{{"tenant", "a", "login", "u"}, {"org", "o", "account", "1"}} {
		if _, err := lim.Decide(ctx, Request{Descriptors: desc(kv...), Cost: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.debts) != 6 {
		t.Fatalf("%d debts recorded, want 6 (5 local admissions and 1 open; no denial, closed or strict): %+v", len(s.debts), s.debts)
	}
	want := recordedDebt{"a", []string{"weir:{a}:shared:a:1"}, []gcra.Limit{{Interval: 100_000_000, Burst: 5}}, 1}
	if got := s.debts[0]; got.group != want.group || !slices.Equal(got.keys, want.keys) || !slices.Equal(got.limits, want.limits) || got.cost != 1 {
		t.Errorf("debt = %+v, want %+v (the key's own limit, not its fallback)", got, want)
	}
	if got := s.debts[5]; got.keys[0] != "weir:{a}:opened:a:x" || got.cost != 3 {
		t.Errorf("open admission's debt = %+v", got)
	}
}

// Limits of different group descriptors whose values a request makes equal
// form one composite; fast and strict must not mix in it (issue 10 §3).
func TestLimiter_requestMixingFastAndStrictIsRefused(t *testing.T) {
	lim, s := newShareLimiter(t)
	_, err := lim.Decide(context.Background(), Request{Descriptors: desc("tenant", "x", "user", "1", "org", "x", "account", "1"), Cost: 1})
	if !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("got %v, want ErrInvalidRequest", err)
	}
	if len(s.strict) != 0 || len(s.debts) != 0 {
		t.Fatal("a refused request reached the store")
	}
}
