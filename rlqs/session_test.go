package rlqs

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/weirhq/weir/rlqs/rlqstest"
)

// fixture is one session over an in-process owner, driven with explicit
// times.
type fixture struct {
	t     *testing.T
	s     *session
	owner *rlqstest.Owner
	now   int64
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t}
	var err error
	if f.owner, err = rlqstest.NewOwner("owner#1", func() int64 { return f.now }); err != nil {
		t.Fatal(err)
	}
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	f.s = newSession(testConfig(), "n1/rlqs/x/1", m)
	return f
}

func usage(id map[string]string, allowed, denied uint64) *rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage {
	return &rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{BucketId: &rlqsv3.BucketId{Bucket: id}, NumRequestsAllowed: allowed, NumRequestsDenied: denied}
}

// report sends a report at f.now (plus the lease calls it triggers) and
// returns the actions.
func (f *fixture) report(domain string, us ...*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage) ([]*rlqsv3.RateLimitQuotaResponse_BucketAction, error) {
	acts, err := f.s.report(mustPolicy(f.t, testPolicy), &rlqsv3.RateLimitQuotaUsageReports{Domain: domain, BucketQuotaUsages: us}, f.now)
	if err != nil {
		return nil, err
	}
	return append(acts, f.renew()...), nil
}

func (f *fixture) renew() []*rlqsv3.RateLimitQuotaResponse_BucketAction {
	var acts []*rlqsv3.RateLimitQuotaResponse_BucketAction
	for _, c := range f.s.calls(f.now) {
		a, err := f.owner.Lease(context.Background(), c.holder, c.refresh)
		acts = append(acts, f.s.apply(c, a, err, f.now, f.now)...)
	}
	return acts
}

func (f *fixture) tick() []*rlqsv3.RateLimitQuotaResponse_BucketAction {
	return append(f.s.tick(mustPolicy(f.t, testPolicy), f.now), f.renew()...)
}

func only(t *testing.T, acts []*rlqsv3.RateLimitQuotaResponse_BucketAction) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	t.Helper()
	if len(acts) != 1 {
		t.Fatalf("got %d actions, want 1: %v", len(acts), acts)
	}
	return acts[0]
}

func blanketOf(a *rlqsv3.RateLimitQuotaResponse_BucketAction) (typev3.RateLimitStrategy_BlanketRule, bool) {
	st := a.GetQuotaAssignmentAction().GetRateLimitStrategy()
	_, ok := st.GetStrategy().(*typev3.RateLimitStrategy_BlanketRule_)
	return st.GetBlanketRule(), ok
}

func TestSession_report_kinds(t *testing.T) {
	cases := map[string]struct {
		domain string
		id     map[string]string
		want   string // allow, none, token
	}{
		"unknown domain":   {"other", map[string]string{"tenant": "acme"}, "allow"},
		"no limit matches": {"edge", map[string]string{"path": "/"}, "allow"},
		"unleasable limit": {"edge", map[string]string{"user": "u1"}, "none"},
		"lease too short":  {"edge", map[string]string{"ip": "10.0.0.1"}, "none"},
		"leasable limit":   {"edge", map[string]string{"tenant": "acme"}, "token"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			acts, err := f.report(c.domain, usage(c.id, 1, 0))
			if err != nil {
				t.Fatal(err)
			}
			switch c.want {
			case "none":
				if len(acts) != 0 {
					t.Fatalf("got %v, want no assignment", acts)
				}
			case "allow":
				a := only(t, acts)
				if r, ok := blanketOf(a); !ok || r != typev3.RateLimitStrategy_ALLOW_ALL || a.GetQuotaAssignmentAction().GetAssignmentTimeToLive().AsDuration() != 10*time.Second {
					t.Fatalf("got %v, want ALLOW_ALL for 10s", a)
				}
			case "token":
				a := only(t, acts)
				tb := a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket()
				if tb == nil || tb.GetFillInterval().AsDuration() != time.Second || a.GetQuotaAssignmentAction().GetAssignmentTimeToLive().AsDuration() != 2*time.Second {
					t.Fatalf("got %v, want a token bucket with a 1s fill for 2s", a)
				}
			}
		})
	}
}

func TestSession_report_refusedChangesNothing(t *testing.T) {
	long := strings.Repeat("x", MaxBytes+1)
	acme := map[string]string{"tenant": "acme"}
	cases := map[string]struct {
		domain string
		us     []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage
		want   error
		msg    string
	}{
		"no domain":       {"", []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(acme, 1, 0)}, ErrInvalidReport, "domain"},
		"other domain":    {"edge2", []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(acme, 1, 0)}, ErrInvalidReport, "differs"},
		"empty bucket id": {"edge", []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(map[string]string{}, 1, 0)}, ErrInvalidReport, "no entries"},
		"long value":      {"edge", []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(map[string]string{"tenant": long}, 1, 0)}, ErrInvalidReport, "bytes"},
		"huge count":      {"edge", []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(acme, MaxCount+1, 0)}, ErrInvalidReport, "counts"},
		"twice":           {"edge", []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(map[string]string{"tenant": "b"}, 1, 0), usage(map[string]string{"tenant": "b"}, 1, 0)}, ErrInvalidReport, "twice"},
		"too many":        {"edge", manyUsages(testConfig().MaxBuckets), ErrTooManyBuckets, "most is 1000"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			if _, err := f.report("edge", usage(acme, 1, 0)); err != nil {
				t.Fatal(err)
			}
			before := *f.s.buckets[bucketKey(&rlqsv3.BucketId{Bucket: acme})]
			n := len(f.s.buckets)
			f.now += int64(time.Second)
			_, err := f.report(c.domain, c.us...)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("err = %v, want %v mentioning %q", err, c.want, c.msg)
			}
			if after := *f.s.buckets[bucketKey(&rlqsv3.BucketId{Bucket: acme})]; len(f.s.buckets) != n || after.demand != before.demand || after.lastReport != before.lastReport || f.s.domain != "edge" {
				t.Fatalf("refused report changed the session: %d buckets (was %d), demand %v (was %v)", len(f.s.buckets), n, after.demand, before.demand)
			}
		})
	}
}

func manyUsages(n int) []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage {
	out := make([]*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage, n)
	for i := range out {
		out[i] = usage(map[string]string{"tenant": "t" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))}, 1, 0)
	}
	return out
}

// TestSession_renew_unchanged: a bucket whose demand holds steady is
// renewed with the same token bucket (so Envoy keeps its bucket and only
// extends the TTL), backed by a fresh lease in the other slot, and the
// older lease is returned with what its assignment could not have used.
func TestSession_renew_unchanged(t *testing.T) {
	f := newFixture(t)
	acme := map[string]string{"tenant": "acme"}
	if _, err := f.report("edge", usage(acme, 1, 0)); err != nil {
		t.Fatal(err)
	}
	var first *typev3.TokenBucket
	for i := range 12 { // 50/s reported every 500ms for 6s
		f.now += int64(500 * time.Millisecond)
		acts, err := f.report("edge", usage(acme, 25, 0))
		if err != nil {
			t.Fatal(err)
		}
		acts = append(acts, f.tick()...)
		for _, a := range acts {
			tb := a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket()
			if tb == nil {
				t.Fatalf("step %d: got %v, want a token bucket", i, a)
			}
			if i >= 6 && first == nil {
				first = tb
			} else if first != nil && (tb.GetMaxTokens() != first.GetMaxTokens() || tb.GetTokensPerFill().GetValue() != first.GetTokensPerFill().GetValue()) {
				t.Fatalf("step %d: renewal changed the bucket from %v to %v", i, first, tb)
			}
		}
	}
	st := f.owner.Stats()["tenant"]
	if first == nil || st.Grants < 3 || st.CreditedUnits == 0 || st.ExpiredUnits != 0 {
		t.Fatalf("bucket %v; owner stats %+v: want several grants, credits and no expiries", first, st)
	}
}

// TestSession_exhausted_deny: when the owner has nothing left, a bucket
// without an assignment gets DENY_ALL for the owner's retry-after rounded
// up to whole seconds, and a token bucket again once units free.
func TestSession_exhausted_deny(t *testing.T) {
	f := newFixture(t)
	p := mustPolicy(t, testPolicy)
	lim := p.Limit("tenant").Params
	for f.owner.Decide("acme", tenantKey(p), lim, f.now) { // spend the whole burst directly
	}
	acme := map[string]string{"tenant": "acme"}
	a := only(t, mustActs(f.report("edge", usage(acme, 1, 0))))
	if r, ok := blanketOf(a); !ok || r != typev3.RateLimitStrategy_DENY_ALL || a.GetQuotaAssignmentAction().GetAssignmentTimeToLive().AsDuration() != time.Second {
		t.Fatalf("got %v, want DENY_ALL for 1s", a)
	}
	f.now += int64(time.Second)
	var tb *typev3.TokenBucket
	for range 10 {
		f.now += int64(100 * time.Millisecond)
		for _, a := range f.tick() {
			tb = a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket()
		}
	}
	if tb == nil {
		t.Fatal("no token bucket once units freed")
	}
}

func mustActs(acts []*rlqsv3.RateLimitQuotaResponse_BucketAction, err error) []*rlqsv3.RateLimitQuotaResponse_BucketAction {
	if err != nil {
		panic(err)
	}
	return acts
}

// TestSession_idle_abandon: a bucket reported idle for IdleAfter is
// abandoned, and its leases are returned once the abandon reached the
// Envoy, crediting the units its assignment could not have used.
func TestSession_idle_abandon(t *testing.T) {
	f := newFixture(t)
	acme := map[string]string{"tenant": "acme"}
	mustActs(f.report("edge", usage(acme, 100, 0)))
	var abandoned bool
	for range 400 { // 40s of ticks, idle reports every second
		f.now += int64(100 * time.Millisecond)
		if f.now%int64(time.Second) == 0 && !abandoned {
			mustActs(f.report("edge", usage(acme, 0, 0)))
		}
		for _, a := range f.tick() {
			abandoned = abandoned || a.GetAbandonAction() != nil
		}
	}
	st := f.owner.Stats()["tenant"]
	if !abandoned || len(f.s.buckets) != 0 || len(f.s.gone) != 0 || st.CreditedUnits == 0 {
		t.Fatalf("abandoned %v, %d buckets, %d awaiting returns, stats %+v", abandoned, len(f.s.buckets), len(f.s.gone), st)
	}
}

// TestSession_close_strands: a stream that ends holds its leases until
// they expire at the owner (the Envoy keeps its assignment), and counts
// them.
func TestSession_close_strands(t *testing.T) {
	f := newFixture(t)
	mustActs(f.report("edge", usage(map[string]string{"tenant": "acme"}, 100, 0)))
	f.s.close()
	f.now += int64(4 * time.Second)
	f.owner.Sweep(f.now)
	st := f.owner.Stats()["tenant"]
	if st.ExpiredUnits == 0 || st.CreditedUnits != 0 {
		t.Fatalf("owner stats %+v: want the lease to expire uncredited", st)
	}
	if got := testutil.ToFloat64(f.s.m.strandedUnit.WithLabelValues("tenant")); got != float64(st.GrantedUnits) {
		t.Fatalf("weir_rlqs_units_stranded_total = %v, want the %d units leased", got, st.GrantedUnits)
	}
}
