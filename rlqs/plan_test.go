package rlqs

import (
	"testing"
	"time"
)

func TestFit(t *testing.T) {
	cases := []struct {
		n    int64
		want int64
		plan bucketPlan
		ok   bool
	}{
		{n: 210, want: 100, plan: bucketPlan{Max: 5, Rate: 100}, ok: true}, // 5 + 100 × 2.05 = 210
		{n: 210, want: 50, plan: bucketPlan{Max: 3, Rate: 50}, ok: true},   // demand caps the rate
		{n: 100, want: 1000, plan: bucketPlan{Max: 3, Rate: 47}, ok: true}, // the units cap it: 3 + 47 × 2.05 <= 100
		{n: 2, want: 10, ok: false},                                        // under a token a second
	}
	for _, c := range cases {
		p, ok := fit(c.n, 2050*time.Millisecond, 50*time.Millisecond, c.want)
		if ok != c.ok || (ok && p != c.plan) {
			t.Errorf("fit(%d, want %d) = %+v, %v; want %+v, %v", c.n, c.want, p, ok, c.plan, c.ok)
		}
		if ok && p.covers(2050*time.Millisecond) > c.n {
			t.Errorf("fit(%d) = %+v lets through %d over the assignment, more than the lease", c.n, p, p.covers(2050*time.Millisecond))
		}
	}
}

// TestCredit: a lease is credited all but a full bucket plus the fill from
// its assignment's send to the moment the Envoy surely stopped spending it.
func TestCredit(t *testing.T) {
	p := bucketPlan{Max: 5, Rate: 100}
	sec := int64(time.Second)
	cases := []struct {
		units, from, end, want int64
	}{
		{units: 210, from: 0, end: 1650 * sec / 1000, want: 40}, // renewed at 1.6s, + 50ms delivery
		{units: 210, from: 0, end: 2050 * sec / 1000, want: 0},  // ran to its expiry
		{units: 210, from: sec, end: sec, want: 205},            // replaced at once: only the bucket
		{units: 3, from: 0, end: sec, want: 0},                  // never negative
	}
	for _, c := range cases {
		if got := credit(c.units, p, c.from, c.end); got != c.want {
			t.Errorf("credit(%d, %+v, %d, %d) = %d, want %d", c.units, p, c.from, c.end, got, c.want)
		}
	}
	if got := credit(7, bucketPlan{}, 0, 0); got != 7 {
		t.Errorf("a lease never assigned credits %d, want all 7", got)
	}
}
