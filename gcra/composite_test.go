package gcra

import (
	"errors"
	"testing"
)

func TestDecideComposite_deniedByOneCommitsNone(t *testing.T) {
	tenant := Limit{Interval: 1_000, Burst: 200} // 1000/s burst 200
	user := Limit{Interval: 20_000, Burst: 2}    // 50/s burst 2
	limits := []Limit{tenant, user}
	tats := []int64{0, 0}
	out := make([]Result, 2)
	now := int64(10_000_000)
	for i := range 2 {
		agg, err := DecideComposite(tats, now, limits, 1, out)
		if err != nil || !agg.Allowed {
			t.Fatalf("request %d: %+v %v", i, agg, err)
		}
		tats[0], tats[1] = out[0].TAT, out[1].TAT
	}
	before := append([]int64(nil), tats...)
	agg, err := DecideComposite(tats, now, limits, 1, out)
	if err != nil {
		t.Fatal(err)
	}
	if agg.Allowed || agg.RetryAfter != 20_000 || agg.Remaining != 0 {
		t.Fatalf("third request: got %+v, want denied by the user limit with retry 20ms", agg)
	}
	if out[0].TAT != before[0] || out[1].TAT != before[1] {
		t.Fatalf("denied composite changed state: %d,%d -> %d,%d", before[0], before[1], out[0].TAT, out[1].TAT)
	}
	if !out[0].Allowed || out[0].Remaining != 198 {
		t.Fatalf("tenant limit alone should admit with 198 remaining and nothing consumed: %+v", out[0])
	}
	if out[1].Allowed || out[1].RetryAfter != 20_000 {
		t.Fatalf("user limit: %+v", out[1])
	}
}

func TestDecideComposite_largestRetrySmallestRemaining(t *testing.T) {
	limits := []Limit{{Interval: 100, Burst: 1}, {Interval: 300, Burst: 1}, {Interval: 50, Burst: 10}}
	tats := []int64{1_100, 1_300, 0}
	out := make([]Result, 3)
	agg, err := DecideComposite(tats, 1_000, limits, 1, out)
	if err != nil {
		t.Fatal(err)
	}
	if agg.Allowed || agg.RetryAfter != 300 || agg.Remaining != 0 || agg.ResetAfter != 300 {
		t.Fatalf("got %+v", agg)
	}
	// Waiting exactly the aggregate retry admits the request.
	agg, _ = DecideComposite(tats, 1_000+agg.RetryAfter, limits, 1, out)
	if !agg.Allowed {
		t.Fatalf("after waiting retry_after the request must pass: %+v", agg)
	}
}

func TestDecideComposite_tooCostly(t *testing.T) {
	limits := []Limit{{Interval: 10, Burst: 100}, {Interval: 10, Burst: 5}}
	out := make([]Result, 2)
	agg, err := DecideComposite([]int64{0, 0}, 0, limits, 6, out)
	if err != nil {
		t.Fatal(err)
	}
	if agg.Allowed || !agg.TooCostly || agg.RetryAfter != 0 {
		t.Fatalf("got %+v", agg)
	}
	if out[0].TAT != 0 || out[1].TAT != 0 {
		t.Fatal("too-costly composite changed state")
	}
}

func TestDecideComposite_badInput(t *testing.T) {
	l := []Limit{seedLimit}
	out := make([]Result, 1)
	if _, err := DecideComposite([]int64{0}, 0, l, 0, out); !errors.Is(err, ErrInvalidCost) {
		t.Errorf("cost 0: %v", err)
	}
	if _, err := DecideComposite([]int64{0, 0}, 0, l, 1, out); err == nil {
		t.Error("mismatched lengths accepted")
	}
	if _, err := DecideComposite(nil, 0, nil, 1, out); err == nil {
		t.Error("no limits accepted")
	}
	if _, err := DecideComposite([]int64{0}, 0, []Limit{{}}, 1, out); !errors.Is(err, ErrInvalidLimit) {
		t.Errorf("invalid limit: %v", err)
	}
}
