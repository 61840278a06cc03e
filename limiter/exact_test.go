package limiter

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestLimiter_highRatesEnforcedAsWritten drives one key of each fast rate
// the policy accepts through the limiter and the memory store, on a fake
// clock, with requests of cost 50 asking twice as fast as the rate for one
// second. Up to the last admission, at time t, the key must have admitted
// burst + rate*t units (what the rate allows), within 0.1 % of the rate and
// never above. With whole-microsecond intervals 999,999/s was enforced as
// 500,000/s and 300,000/s as about 83 % of itself; with whole nanoseconds
// the worst case is 999,999/s, enforced as one unit per 1001 ns: 0.0999 %
// below.
func TestLimiter_highRatesEnforcedAsWritten(t *testing.T) {
	for _, rate := range []int64{300_000, 600_000, 999_999, 1_000_000} {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			const window, cost, burst = time.Second, 50, 100
			f := newFixture(t, fmt.Sprintf("version: t\nlimits:\n  - {name: fast, match: [k], rate: %d/s, burst: %d}\n", rate, burst))
			step := time.Second * cost / time.Duration(2*rate)
			var admitted int64
			var last time.Duration
			for at := time.Duration(0); at < window; at += step {
				if f.decide(t, cost, "k", "x").Allowed {
					admitted, last = admitted+cost, at
				}
				f.clock.Add(step)
			}
			allowed := float64(burst) + float64(rate)*last.Seconds()
			if got := float64(admitted); got > allowed || got < float64(burst)+0.999*float64(rate)*last.Seconds() {
				t.Fatalf("%d/s admitted %d units by %s, want at most %.0f and within 0.1%% of the rate", rate, admitted, last, allowed)
			}
			if last < window-2*step {
				t.Fatalf("last admission at %s: the key stopped admitting", last)
			}
		})
	}
}

// TestLimiter_DecideMatches_repeatedKeyChargedOnce: matches naming the same
// key twice are one limit asked twice about one request, so it is charged
// once, and the decision has one entry for it.
func TestLimiter_DecideMatches_repeatedKeyChargedOnce(t *testing.T) {
	f := newFixture(t, testPolicy)
	p := f.lim.Policy()
	ms, err := p.Resolve(desc("tenant", "acme", "user", "u1"), nil)
	if err != nil || len(ms) != 2 {
		t.Fatalf("resolve: %v, %v", ms, err)
	}
	twice := append(ms[:1:1], ms[0], ms[1], ms[0])
	d, err := f.lim.DecideMatches(context.Background(), p, twice, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Limits) != 2 || d.Limits[0].Key != ms[0].Key || d.Limits[1].Key != ms[1].Key {
		t.Fatalf("limits %+v, want one entry per distinct key in first-seen order", d.Limits)
	}
	if d.Limits[0].Remaining != 2 { // 5/s burst 3: one unit charged, not two
		t.Fatalf("per-user remaining %d after one request, want 2", d.Limits[0].Remaining)
	}
	if twice[1].Key != ms[0].Key || len(twice) != 4 {
		t.Fatal("DecideMatches wrote the caller's slice")
	}
}

// TestLimiter_tooCostlyCompositeNamesNoWait: the user's burst is below the
// cost and the tenant is also spent. No wait makes the request pass, so the
// decision's RetryAfter is zero while the tenant's own entry names its wait.
func TestLimiter_tooCostlyCompositeNamesNoWait(t *testing.T) {
	f := newFixture(t, testPolicy)
	if d := f.decide(t, 50, "tenant", "acme"); !d.Allowed {
		t.Fatalf("spending the tenant: %+v", d)
	}
	d := f.decide(t, 4, "tenant", "acme", "user", "u1") // per-user burst is 3
	if d.Allowed || !d.TooCostly || d.RetryAfter != 0 {
		t.Fatalf("decision %+v, want TooCostly with RetryAfter 0", d)
	}
	for _, l := range d.Limits {
		switch l.Name {
		case "per-user":
			if !l.TooCostly || l.RetryAfter != 0 {
				t.Errorf("per-user %+v, want TooCostly", l)
			}
		case "per-tenant":
			if l.TooCostly || l.RetryAfter != 40*time.Millisecond { // 4 units at 100/s
				t.Errorf("per-tenant %+v, want its own wait of 40ms", l)
			}
		}
	}
}
