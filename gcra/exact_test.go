package gcra

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// TestPerPeriod_highRatesAdmitWithinTenthOfPercent drives a key of each
// fast rate the policy accepts with requests of cost 10 asking twice as fast
// as the rate for two seconds. Up to the last admission, at time t, the key
// must have admitted burst + rate*t units, within 0.1 % of the rate and
// never above. With a whole-microsecond interval 999,999/s was enforced as
// 500,000/s; with whole nanoseconds its interval is 1001 ns, 0.0999 % slow.
func TestPerPeriod_highRatesAdmitWithinTenthOfPercent(t *testing.T) {
	const window, cost, burst = 2 * time.Second, 10, 20
	for _, rate := range []int64{300_000, 600_000, 999_999, 1_000_000} {
		t.Run(fmt.Sprintf("%d per second", rate), func(t *testing.T) {
			l, err := PerPeriod(rate, time.Second, burst)
			if err != nil {
				t.Fatal(err)
			}
			step := int64(time.Second) * cost / (2 * rate)
			start := int64(1_700_000_000) * int64(time.Second)
			var tat, admitted, last int64
			for now := start; now < start+int64(window); now += step {
				if r := decide(tat, now, l, cost); r.Allowed {
					admitted, tat, last = admitted+cost, r.TAT, now-start
				}
			}
			perNs := float64(rate) / float64(time.Second)
			allowed := burst + perNs*float64(last)
			if got := float64(admitted); got > allowed || got < burst+0.999*perNs*float64(last) {
				t.Fatalf("%d/s admitted %d units by %dns, want at most %.0f and within 0.1%% of the rate", rate, admitted, last, allowed)
			}
			if last < int64(window)-2*step {
				t.Fatalf("last admission at %dns: the key stopped admitting", last)
			}
		})
	}
}

// TestDecide_saturatesNearTheTopOfInt64 checks that a TAT or now near the
// largest int64 neither wraps nor makes the key admit everything.
func TestDecide_saturatesNearTheTopOfInt64(t *testing.T) {
	l := Limit{Interval: 1_000_000_000, Burst: 5}
	for _, tat := range []int64{math.MaxInt64, math.MaxInt64 - 1, MaxTime + 1} {
		r, err := Decide(tat, 1_800_000_000_000_000_000, l, 1)
		if err != nil {
			t.Fatal(err)
		}
		if r.Allowed || r.RetryAfter <= 0 || r.ResetAfter <= 0 || r.TAT != tat {
			t.Fatalf("tat %d: got %+v, want a denial with a positive wait and the TAT unchanged", tat, r)
		}
	}
	// A now at the top of the range: the key still fills and then denies.
	tat := int64(0)
	for i := range 6 {
		r, _ := Decide(tat, math.MaxInt64, l, 1)
		if r.Allowed != (i < 5) || r.TAT < tat || r.ResetAfter < 0 {
			t.Fatalf("request %d at now=MaxInt64: got %+v", i, r)
		}
		tat = r.TAT
	}
	// Negative inputs read as 0, never as a huge span ahead.
	if r, _ := Decide(math.MinInt64, math.MinInt64, l, 1); !r.Allowed || r.TAT != l.Interval {
		t.Fatalf("negative tat and now: got %+v", r)
	}
}

// TestDecideComposite_tooCostlyReportsNoRetry: when one limit's burst is
// below the cost and another limit is merely busy, the aggregate is
// TooCostly and must not name a wait (no wait makes the request pass).
func TestDecideComposite_tooCostlyReportsNoRetry(t *testing.T) {
	limits := []Limit{{Interval: 10, Burst: 100}, {Interval: 10, Burst: 5}}
	out := make([]Result, 2)
	busy := int64(1000 + 100*10) // limit 0 fully spent at now=1000
	agg, err := DecideComposite([]int64{busy, 0}, 1000, limits, 6, out)
	if err != nil {
		t.Fatal(err)
	}
	if agg.Allowed || !agg.TooCostly || agg.RetryAfter != 0 {
		t.Fatalf("aggregate: got %+v, want TooCostly with RetryAfter 0", agg)
	}
	if out[0].RetryAfter != 60 || !out[1].TooCostly {
		t.Fatalf("per limit: got %+v, want limit 0 to name its own wait of 60 and limit 1 TooCostly", out)
	}
}
