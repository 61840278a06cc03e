package limiter

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/policy"
)

const partPolicy = `
version: part
limits:
  - {name: halved, match: [tenant, user], group: tenant, rate: 10/s, burst: 8}
  - {name: fixed, match: [tenant, api], group: tenant, rate: 10/s, burst: 8, fallback_rate: 10/s, fallback_burst: 6}
  - {name: tight, match: [tenant, route], group: tenant, rate: 10/s, burst: 8, fallback_rate: 1/s, fallback_burst: 1}
  - {name: whole, match: [tenant, page], group: tenant, rate: 10/s, burst: 8}
  - {name: nothing, match: [tenant, login], group: tenant, rate: 10/s, burst: 8}
`

// halfPart is a FallbackPart holding half of every limit but "whole" (all
// of it) and "nothing" (a part that admits nothing).
func halfPart(lim *policy.Limit, whole gcra.Limit) (gcra.Limit, bool) {
	switch lim.Name {
	case "whole":
		return whole, true
	case "nothing":
		return gcra.Limit{}, false
	}
	return gcra.Limit{Interval: whole.Interval * 2, Burst: whole.Burst / 2}, true
}

func newPartLimiter(t *testing.T, opts ...Option) (*Limiter, *debtStore) {
	t.Helper()
	p, err := policy.Parse("part.yaml", []byte(partPolicy))
	if err != nil {
		t.Fatal(err)
	}
	s := &debtStore{}
	clock := &fakeClock{now: time.UnixMicro(1_700_000_000_000_000)}
	opts = append(opts, WithClock(clock.Now), WithMembers(func() int { return 2 }))
	lim, err := New(DefaultConfig(), policy.Static(p), s, nil, prometheus.NewRegistry(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return lim, s
}

// TestLimiter_WithFallbackPart_fallsBackToTheNodesShareOfThePart: one of 2
// nodes holding half of a limit of burst 8 falls back to burst 2 (half of
// the part), and a looser fallback_rate is cut to it; a stricter one, and
// a limit held whole, keep what the policy says.
func TestLimiter_WithFallbackPart_fallsBackToTheNodesShareOfThePart(t *testing.T) {
	for _, c := range []struct {
		limit                 string
		kv                    []string
		withPart, withoutPart int
	}{
		{"halved", []string{"tenant", "a", "user", "1"}, 2, 4}, // ceil(8/2) of the whole; ceil(4/2) of the part
		{"fixed", []string{"tenant", "a", "api", "1"}, 2, 6},   // fallback_burst 6, cut to the part's 2
		{"tight", []string{"tenant", "a", "route", "1"}, 1, 1}, // fallback_burst 1 is stricter already
		{"whole", []string{"tenant", "a", "page", "1"}, 4, 4},  // held whole: unchanged
	} {
		t.Run(c.limit, func(t *testing.T) {
			without, _ := newPartLimiter(t)
			with, _ := newPartLimiter(t, WithFallbackPart(halfPart))
			if got := admitAll(t, without, 10, c.kv...); got != c.withoutPart {
				t.Errorf("without a part: %d admitted at once, want %d", got, c.withoutPart)
			}
			if got := admitAll(t, with, 10, c.kv...); got != c.withPart {
				t.Errorf("with half of the limit as the part: %d admitted at once, want %d", got, c.withPart)
			}
		})
	}
	with, _ := newPartLimiter(t, WithFallbackPart(halfPart))
	d, err := with.Decide(context.Background(), Request{Descriptors: desc("tenant", "b", "user", "1"), Cost: 1})
	// The share of the part: 10/s halved over 2 nodes is one unit per 400ms.
	if err != nil || d.Limits[0].Burst != 2 || d.Limits[0].Window != 800*time.Millisecond {
		t.Errorf("the response describes %+v (%v), want the share of the part: burst 2 over 800ms", d.Limits, err)
	}
}

// TestLimiter_WithFallbackPart_partThatAdmitsNothingDeniesAsClosed: a
// limit whose part admits nothing is denied by its fallback, flagged as
// closed, retried after one of its intervals, and owes no debt.
func TestLimiter_WithFallbackPart_partThatAdmitsNothingDeniesAsClosed(t *testing.T) {
	lim, s := newPartLimiter(t, WithFallbackPart(halfPart))
	d, err := lim.Decide(context.Background(), Request{Descriptors: desc("tenant", "a", "login", "u"), Cost: 3})
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed || d.Fallback == nil || d.Fallback.Mode != "closed" || d.RetryAfter != 100*time.Millisecond {
		t.Fatalf("%+v (fallback %+v), want denied by a closed fallback, retry after 100ms", d, d.Fallback)
	}
	if len(s.debts) != 0 {
		t.Fatalf("a denial recorded debt: %+v", s.debts)
	}
}
