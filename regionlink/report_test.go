package regionlink

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/weirhq/weir/region"
)

// TestLink_Run_reportsOnEveryTick drives Run's ticker with the manual
// clock: the ticker fires at exactly the interval, one report per tick,
// numbered in order, and Run ends with its context.
func TestLink_Run_reportsOnEveryTick(t *testing.T) {
	n, clk := newNet(), newClock()
	n.reports = make(chan region.Report, 1)
	k := keyHomedIn(t, "eu", 0)
	newLink(t, n, clk, "eu", "eu-1", func(string) string { return "eu-1" })
	us := newLink(t, n, clk, "us", "us-1", func(string) string { return "us-1" })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- us.Run(ctx) }()
	if err := clk.WaitForTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	interval := testShares().Interval
	if got, want := clk.Timers(), []time.Time{clk.Now().Add(interval)}; !slices.Equal(got, want) {
		t.Fatalf("pending timers %v, want Run's ticker at %v", got, want)
	}
	var seq uint64
	for i := range 3 {
		enforce(t, us, tats{}, k, 100, 0)
		next := clk.Now().Add(interval)
		clk.Advance(interval - time.Nanosecond)
		if got := clk.Timers(); !slices.Equal(got, []time.Time{next}) {
			t.Fatalf("tick %d: 1ns before it, pending timers %v, want the ticker still at %v", i, got, next)
		}
		clk.Advance(time.Nanosecond)
		var r region.Report
		select {
		case r = <-n.reports:
		case <-ctx.Done():
			t.Fatalf("tick %d: no report: %v", i, ctx.Err())
		}
		if r.From != "us" || r.Home != "eu" || len(r.Items) != 1 || r.Items[0].Key != k {
			t.Fatalf("tick %d: report %+v, want us's demand on %s to eu", i, r, k)
		}
		if r.Seq <= seq {
			t.Fatalf("tick %d: seq %d after %d", i, r.Seq, seq)
		}
		seq = r.Seq
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if got := clk.Timers(); len(got) != 0 {
		t.Fatalf("Run left timers pending: %v", got)
	}
}
