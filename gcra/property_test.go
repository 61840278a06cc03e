package gcra

import (
	"math/rand/v2"
	"testing"
)

// bucket is a deliberately naive token bucket, the reference GCRA must match.
// Tokens are kept multiplied by the interval so that all arithmetic is exact:
// level is in microseconds of credit, between 0 and Burst*Interval.
type bucket struct {
	l     Limit
	level int64
	last  int64
}

func newBucket(l Limit, start int64) *bucket { return &bucket{l: l, level: l.Span(), last: start} }

// take refills for the time since the last call, then admits cost if the
// bucket holds enough. Time must not go backwards (a bucket cannot say what
// its level was in the past once it has saturated); TestDecide_clockGoesBackwards
// covers that case for GCRA.
func (b *bucket) take(now, cost int64) (allowed bool, retry, remaining int64) {
	b.level = min(b.l.Span(), b.level+(now-b.last))
	b.last = now
	need := cost * b.l.Interval
	if cost > b.l.Burst {
		return false, 0, b.level / b.l.Interval
	}
	if b.level < need {
		return false, need - b.level, b.level / b.l.Interval
	}
	b.level -= need
	return true, 0, b.level / b.l.Interval
}

type event struct{ at, cost int64 }

func randomLimit(r *rand.Rand) Limit {
	return Limit{Interval: 1 + r.Int64N(50_000), Burst: 1 + r.Int64N(20)}
}

func TestDecide_matchesNaiveBucket(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		l := randomLimit(r)
		now := r.Int64N(1 << 40)
		ref := newBucket(l, now)
		var tat int64
		for step := range 400 {
			now += r.Int64N(3 * l.Interval)
			cost := 1 + r.Int64N(l.Burst+1) // sometimes above burst
			got, err := Decide(tat, now, l, cost)
			if err != nil {
				t.Fatal(err)
			}
			allowed, retry, remaining := ref.take(now, cost)
			if got.Allowed != allowed || got.RetryAfter != retry || got.Remaining != remaining {
				t.Fatalf("round %d step %d limit %+v now %d cost %d: gcra %+v, bucket allowed=%v retry=%d remaining=%d",
					round, step, l, now, cost, got, allowed, retry, remaining)
			}
			tat = got.TAT
		}
	}
}

// checkWindows asserts that for every window [a, b] bounded by admitted
// events, admitted cost <= B + (b-a)/T, kept exact by multiplying by T.
func checkWindows(t *testing.T, l Limit, admitted []event) {
	t.Helper()
	for i := range admitted {
		var sum int64
		for j := i; j < len(admitted); j++ {
			sum += admitted[j].cost
			w := admitted[j].at - admitted[i].at
			if sum*l.Interval > l.Span()+w {
				t.Fatalf("limit %+v: %d units admitted in a %dus window [%d, %d], bound B + W/T = %d + %d/%d",
					l, sum, w, admitted[i].at, admitted[j].at, l.Burst, w, l.Interval)
			}
		}
	}
}

func TestDecide_windowBound(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		l := randomLimit(r)
		var tat, now int64
		var admitted []event
		for range 500 {
			now += r.Int64N(l.Interval) // arrivals faster than the rate
			cost := 1 + r.Int64N(l.Burst)
			res, _ := Decide(tat, now, l, cost)
			if res.Allowed {
				admitted = append(admitted, event{now, cost})
			}
			tat = res.TAT
		}
		checkWindows(t, l, admitted)
	}
}

func TestDecideComposite_eachLimitWithinBound(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 100 {
		limits := []Limit{randomLimit(r), randomLimit(r), randomLimit(r)}
		tats := make([]int64, 3)
		out := make([]Result, 3)
		var now int64
		var admitted []event
		for range 500 {
			now += r.Int64N(20_000)
			cost := 1 + r.Int64N(4)
			agg, err := DecideComposite(tats, now, limits, cost, out)
			if err != nil {
				t.Fatal(err)
			}
			for i := range tats {
				if !agg.Allowed && out[i].TAT != tats[i] {
					t.Fatalf("denied composite moved limit %d", i)
				}
				tats[i] = out[i].TAT
			}
			if agg.Allowed {
				admitted = append(admitted, event{now, cost})
			}
		}
		for _, l := range limits {
			checkWindows(t, l, admitted)
		}
	}
}

func FuzzDecide(f *testing.F) {
	f.Add(int64(0), int64(0), int64(200_000), int64(3), int64(1))
	f.Add(int64(600_000), int64(199_999), int64(200_000), int64(3), int64(1))
	f.Add(int64(-5), int64(1<<60), int64(1), int64(1), int64(1<<40))
	f.Fuzz(func(t *testing.T, tat, now, interval, burst, cost int64) {
		// Keep times in a range where now+span cannot overflow, as the
		// package documents for realistic clocks.
		if now < -(1<<61) || now > 1<<61 || tat < -(1<<61) || tat > 1<<62 {
			return
		}
		l := Limit{Interval: interval, Burst: burst}
		r, err := Decide(tat, now, l, cost)
		if err != nil {
			return
		}
		// Decide reads a now outside [0, MaxTime] as the nearest end of it
		// (see MaxTime), and every figure it returns is measured from there.
		now = min(max(now, 0), MaxTime)
		if r.Allowed && (r.TAT-now > l.Span() || r.TAT <= max(tat, now)-1) {
			t.Fatalf("admitted with TAT %d beyond now %d + span %d", r.TAT, now, l.Span())
		}
		if !r.Allowed && r.TAT != tat {
			t.Fatal("denial changed state")
		}
		if r.Remaining < 0 || r.Remaining > l.Burst || r.RetryAfter < 0 || r.ResetAfter < 0 {
			t.Fatalf("out of range: %+v", r)
		}
		if !r.Allowed && !r.TooCostly {
			// Waiting exactly RetryAfter admits the same request.
			again, _ := Decide(tat, now+r.RetryAfter, l, cost)
			if !again.Allowed {
				t.Fatalf("retry_after %d did not suffice: %+v", r.RetryAfter, again)
			}
		}
	})
}

func BenchmarkDecide(b *testing.B) {
	l := Limit{Interval: 1_000, Burst: 200}
	var tat, now int64
	b.ReportAllocs()
	for b.Loop() {
		now += 900
		r, _ := Decide(tat, now, l, 1)
		tat = r.TAT
	}
}

func BenchmarkDecideComposite(b *testing.B) {
	limits := []Limit{{Interval: 1_000, Burst: 200}, {Interval: 20_000, Burst: 20}}
	tats := make([]int64, 2)
	out := make([]Result, 2)
	var now int64
	b.ReportAllocs()
	for b.Loop() {
		now += 15_000
		if _, err := DecideComposite(tats, now, limits, 1, out); err != nil {
			b.Fatal(err)
		}
		tats[0], tats[1] = out[0].TAT, out[1].TAT
	}
}
