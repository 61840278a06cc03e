package gcra

import (
	"errors"
	"math"
	"testing"
	"time"
)

// us is one microsecond in gcra's nanoseconds. The seed traced its example
// in microseconds; the tables below keep its numbers and scale them.
const us = int64(1000)

// seedLimit is the seed's hand-traced limit: 5 per second, burst 3.
var seedLimit = Limit{Interval: 200_000 * us, Burst: 3}

func TestDecide_seedHandTrace(t *testing.T) {
	steps := []struct {
		now       int64
		allowed   bool
		remaining int64
		retry     int64
		tat       int64
	}{
		{0, true, 2, 0, 200_000},
		{0, true, 1, 0, 400_000},
		{0, true, 0, 0, 600_000},
		{0, false, 0, 200_000, 600_000},
		{250_000, true, 0, 0, 800_000},
		{250_000, false, 0, 150_000, 800_000},
	}
	var tat int64
	for i, s := range steps {
		r, err := Decide(tat, s.now*us, seedLimit, 1)
		if err != nil {
			t.Fatal(err)
		}
		if r.Allowed != s.allowed || r.Remaining != s.remaining || r.RetryAfter != s.retry*us || r.TAT != s.tat*us {
			t.Fatalf("step %d at %dus: got %+v, want allowed=%v remaining=%d retry=%d tat=%d",
				i, s.now, r, s.allowed, s.remaining, s.retry, s.tat)
		}
		tat = r.TAT
	}
}

func TestDecide_boundaries(t *testing.T) {
	// After three requests at t=0 the TAT is 600ms; one more unit fits when
	// allow_at = 800ms - 600ms = 200ms <= now.
	const tat = 600_000 * us
	tests := []struct {
		name    string
		now     int64
		allowed bool
		retry   int64
	}{
		{"one nanosecond early", 200_000*us - 1, false, 1},
		{"exactly on time", 200_000 * us, true, 0},
		{"one nanosecond late", 200_000*us + 1, true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Decide(tat, tc.now, seedLimit, 1)
			if err != nil {
				t.Fatal(err)
			}
			if r.Allowed != tc.allowed || r.RetryAfter != tc.retry {
				t.Fatalf("got %+v, want allowed=%v retry=%d", r, tc.allowed, tc.retry)
			}
		})
	}
}

func TestDecide_remainingAndReset(t *testing.T) {
	tests := []struct {
		name      string
		tat, now  int64
		cost      int64
		remaining int64
		reset     int64
	}{
		{"rested key, cost 1", 0, 1_000_000, 1, 2, 200_000},
		{"rested key, full burst", 0, 1_000_000, 3, 0, 600_000},
		{"partly refilled: one microsecond short of a unit", 1_600_000, 1_200_001, 1, 0, 599_999},
		{"partly refilled: exactly a unit", 1_600_000, 1_200_000, 1, 0, 600_000},
		{"tat long past behaves as rested", 5, 9_000_000, 2, 1, 400_000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Decide(tc.tat*us, tc.now*us, seedLimit, tc.cost)
			if err != nil {
				t.Fatal(err)
			}
			if r.Remaining != tc.remaining || r.ResetAfter != tc.reset*us {
				t.Fatalf("got %+v, want remaining=%d reset=%d", r, tc.remaining, tc.reset)
			}
		})
	}
}

func TestDecide_clockGoesBackwards(t *testing.T) {
	// Burst used up at t=1s; a clock that then reads 0.5s must not refill.
	tat := int64(0)
	for range 3 {
		r, _ := Decide(tat, 1_000_000*us, seedLimit, 1)
		tat = r.TAT
	}
	r, err := Decide(tat, 500_000*us, seedLimit, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Allowed {
		t.Fatalf("backwards clock admitted a request: %+v", r)
	}
	if r.RetryAfter != 700_000*us {
		t.Fatalf("retry after %d, want 700ms (exact from the stale reading)", r.RetryAfter)
	}
	if r.TAT != tat {
		t.Fatalf("denial changed the TAT from %d to %d", tat, r.TAT)
	}
}

func TestDecide_tooCostly(t *testing.T) {
	r, err := Decide(0, 0, seedLimit, 4)
	if err != nil {
		t.Fatal(err)
	}
	if r.Allowed || !r.TooCostly || r.RetryAfter != 0 || r.TAT != 0 {
		t.Fatalf("cost above burst: got %+v, want TooCostly with no retry and no state change", r)
	}
	if r.Remaining != 3 {
		t.Fatalf("remaining %d, want 3 (a rested key)", r.Remaining)
	}
}

func TestDecide_invalidInput(t *testing.T) {
	tests := []struct {
		name string
		l    Limit
		cost int64
		want error
	}{
		{"zero cost", seedLimit, 0, ErrInvalidCost},
		{"negative cost", seedLimit, -1, ErrInvalidCost},
		{"zero interval", Limit{Interval: 0, Burst: 1}, 1, ErrInvalidLimit},
		{"zero burst", Limit{Interval: 1, Burst: 0}, 1, ErrInvalidLimit},
		{"span overflows", Limit{Interval: math.MaxInt64 / 2, Burst: 3}, 1, ErrInvalidLimit},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Decide(0, 0, tc.l, tc.cost); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestDecide_hugeNumbersDoNotOverflow(t *testing.T) {
	// The largest valid span with a realistic epoch-based now.
	l := Limit{Interval: MaxSpan / 1_000_000_000, Burst: 1_000_000_000}
	now := int64(1_800_000_000_000_000_000)
	r, err := Decide(0, now, l, 1_000_000_000)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Allowed || r.TAT != now+l.Span() || r.Remaining != 0 {
		t.Fatalf("got %+v", r)
	}
	r, _ = Decide(r.TAT, now, l, 1)
	if r.Allowed || r.RetryAfter != l.Interval {
		t.Fatalf("second request: got %+v, want retry %d", r, l.Interval)
	}
}

func TestPerPeriod(t *testing.T) {
	tests := []struct {
		n      int64
		period time.Duration
		want   int64
	}{
		{5, time.Second, 200_000_000},
		{3, time.Second, 333_333_334}, // rounded up: never faster than asked
		{1000, time.Second, 1_000_000},
		{60, time.Minute, 1_000_000_000},
		{1, time.Hour, 3_600_000_000_000},
		{999_999, time.Second, 1001},
		{1_000_000, time.Second, 1000},
		{1, 24 * time.Hour, 86_400_000_000_000},
		// A sub-microsecond period is not truncated to whole microseconds
		// first (1.5us once became 1us: faster than asked).
		{1, 1500 * time.Nanosecond, 1500},
		{2, 2999 * time.Nanosecond, 1500},
	}
	for _, tc := range tests {
		l, err := PerPeriod(tc.n, tc.period, 1)
		if err != nil || l.Interval != tc.want {
			t.Errorf("PerPeriod(%d, %s) = %+v, %v; want interval %d", tc.n, tc.period, l, err, tc.want)
		}
	}
	for _, bad := range []struct {
		n      int64
		period time.Duration
		burst  int64
	}{{0, time.Second, 1}, {1, 0, 1}, {2, time.Nanosecond, 1}, {1, time.Second, 0}, {1, 24 * time.Hour, 1 << 40}} {
		if _, err := PerPeriod(bad.n, bad.period, bad.burst); !errors.Is(err, ErrInvalidLimit) {
			t.Errorf("PerPeriod(%d, %s, %d): got %v, want ErrInvalidLimit", bad.n, bad.period, bad.burst, err)
		}
	}
}

func TestCeilSeconds(t *testing.T) {
	for _, tc := range []struct{ ns, want int64 }{
		{-5, 0}, {0, 0}, {1, 1}, {999_999_999, 1}, {1_000_000_000, 1}, {1_000_000_001, 2}, {150_000_000, 1},
	} {
		if got := CeilSeconds(tc.ns); got != tc.want {
			t.Errorf("CeilSeconds(%d) = %d, want %d", tc.ns, got, tc.want)
		}
	}
	for _, tc := range []struct{ ns, want int64 }{{-1, 0}, {0, 0}, {1, 1}, {999, 1}, {1000, 1}, {1001, 2}} {
		if got := CeilMicros(tc.ns); got != tc.want {
			t.Errorf("CeilMicros(%d) = %d, want %d", tc.ns, got, tc.want)
		}
	}
}
