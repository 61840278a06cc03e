package lease

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/weirhq/weir/gcra"
)

func TestCheckLeasable(t *testing.T) {
	tests := []struct {
		name  string
		l     gcra.Limit
		t     Terms
		nodes int
		want  error
	}{
		{"burst 4 per node", gcra.Limit{Interval: 1000, Burst: 12}, terms, 3, nil},
		{"one unit short", gcra.Limit{Interval: 1000, Burst: 11}, terms, 3, ErrNotLeasable},
		{"single node", gcra.Limit{Interval: 1000, Burst: 4}, terms, 1, nil},
		{"no max", lim20, Terms{TTL: time.Second}, 3, ErrInvalidTerms},
		{"ttl under a microsecond", lim20, Terms{Max: 1, TTL: time.Nanosecond}, 3, ErrInvalidTerms},
		{"invalid limit", gcra.Limit{Burst: 20}, terms, 3, gcra.ErrInvalidLimit},
		{"no nodes", lim20, terms, 0, ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckLeasable(tt.l, tt.t, tt.nodes)
			if (tt.want == nil) != (err == nil) || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
	err := CheckLeasable(gcra.Limit{Interval: 1000, Burst: 11}, terms, 3)
	if want := "lease: limit is not leasable: burst 11 is below 4 × 3 nodes = 12"; err.Error() != want {
		t.Fatalf("message %q, want %q", err, want)
	}
}

func TestSize(t *testing.T) {
	tt := Terms{Max: 50, TTL: 250 * time.Millisecond}
	tests := []struct {
		demand float64
		want   int64
	}{
		{0, 0}, {-3, 0}, {math.NaN(), 0}, {0.0001, 1}, {4, 1}, {4.04, 2}, {100, 25}, {200, 50}, {1e300, 50}, {math.Inf(1), 50},
	}
	for _, c := range tests {
		if got := Size(c.demand, tt); got != c.want {
			t.Errorf("Size(%v) = %d, want %d", c.demand, got, c.want)
		}
	}
	if Granted.String() != "granted" || Busy.String() != "busy" || Outcome(99).String() != "unknown" {
		t.Error("outcome names")
	}
	if Cap(gcra.Limit{Interval: 1, Burst: 21}) != 10 {
		t.Error("cap of burst 21 is not 10")
	}
}

// Reach is the larger of a scheduled grant's TAT and the persisted
// reservation: for the bench's hot key (1000/s, burst 100, ttl 250ms, 5ms
// grace) the reservation, 250 + 5 + 50 ms; for a long span the schedule.
func TestReach_largerOfScheduleAndReservation(t *testing.T) {
	ms := int64(time.Millisecond)
	hot := gcra.Limit{Interval: ms, Burst: 100}
	if got := Reach(hot, Terms{Max: 10, TTL: 250 * time.Millisecond}, 5*time.Millisecond); got != 305*ms {
		t.Fatalf("hot key: reach %dms, want 305ms", got/ms)
	}
	slow := gcra.Limit{Interval: 100 * ms, Burst: 40} // span 4s
	if got := Reach(slow, Terms{Max: 10, TTL: time.Second}, 5*time.Millisecond); got != 4500*ms {
		t.Fatalf("slow key: reach %dms, want 4.5s", got/ms)
	}
}
