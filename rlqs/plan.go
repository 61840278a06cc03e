package rlqs

import (
	"math"
	"time"
)

// bucketPlan is one token-bucket assignment as Envoy applies it: a bucket
// of Max tokens, full when it is (re)created, refilled continuously at Rate
// tokens per second up to Max. Envoy's fill rate is tokens_per_fill over
// fill_interval in whole seconds, so weir always sends a 1s fill interval
// and Rate tokens per fill.
type bucketPlan struct {
	Max, Rate int64
}

// zero reports whether p is no plan (a lease granted and never assigned).
func (p bucketPlan) zero() bool { return p.Max == 0 && p.Rate == 0 }

// fill is the most tokens p adds in d, rounded up.
func (p bucketPlan) fill(d time.Duration) int64 {
	if d <= 0 || p.Rate == 0 {
		return 0
	}
	return int64(math.Ceil(float64(p.Rate) * d.Seconds()))
}

// covers is the most an Envoy honouring p can admit in a span of d that
// starts with a full bucket: Max + Rate × d. A lease backing an assignment
// of lifetime d must hold at least this.
func (p bucketPlan) covers(d time.Duration) int64 { return p.Max + p.fill(d) }

// fit chooses the plan that n leased units back for an assignment whose
// Envoy lifetime is at most life: the rate is the wanted rate or the most
// the units carry, and the bucket holds burst's worth of that rate (at
// least one token). It returns false when the units carry less than one
// token a second: no token bucket fits.
func fit(n int64, life, burst time.Duration, want int64) (bucketPlan, bool) {
	rate := int64(float64(n) / (life + burst).Seconds())
	rate = min(rate, max(want, 1))
	if rate < 1 {
		return bucketPlan{}, false
	}
	p := bucketPlan{Rate: rate, Max: max(1, int64(math.Ceil(float64(rate)*burst.Seconds())))}
	for p.covers(life) > n && p.Max > 1 {
		p.Max--
	}
	for p.covers(life) > n && p.Rate > 1 { // rounding: give up rate, not exactness
		p.Rate--
	}
	return p, p.covers(life) <= n
}

// credit is how many of a lease's units may go back to the owner once the
// Envoy can no longer spend them: all but what the assignment it backed
// could have let through between assignedAt and end (the moment a later
// assignment or an abandon surely reached the Envoy, or the assignment's
// own expiry). The Envoy's bucket is never fuller than Max, so a full
// bucket at assignedAt plus the fill until end bounds it; the pocket the
// Envoy still holds at end is backed by the next lease.
func credit(units int64, p bucketPlan, assignedAt, end int64) int64 {
	return max(0, units-p.covers(time.Duration(end-assignedAt)))
}
