package gcra

import (
	"math"
	"testing"
	"time"
)

// TestPerPeriod_highRatesAdmitWithinTenthOfPercent drives a key with
// requests faster than its rate for ten seconds and checks that the number
// admitted is within 0.1 % of what the rate promises (plus the burst).
// With a whole-microsecond interval 999,999/s was enforced as 500,000/s.
func TestPerPeriod_highRatesAdmitWithinTenthOfPercent(t *testing.T) {
	const window = 10 * time.Second
	for _, rate := range []int64{300_000, 600_000, 999_999, 1_000_000} {
		t.Run(time.Duration(rate).String(), func(t *testing.T) {
			const burst = 10
			l, err := PerPeriod(rate, time.Second, burst)
			if err != nil {
				t.Fatal(err)
			}
			// Ask every 250ns with cost 1: four times the fastest rate.
			const step = 250
			start := int64(1_700_000_000) * int64(time.Second)
			var tat, admitted int64
			for now := start; now < start+int64(window); now += step {
				r := decide(tat, now, l, 1)
				if r.Allowed {
					admitted++
					tat = r.TAT
				}
			}
			want := float64(rate)*window.Seconds() + burst
			if got := float64(admitted); math.Abs(got-want)/want > 0.001 || got > want {
				t.Fatalf("%d/s over %s admitted %d, want %.0f within 0.1%% and never above", rate, window, admitted, want)
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
