package rested

import (
	"testing"
	"time"

	"github.com/weirhq/weir/clock/clocktest"
)

func newRule(t *testing.T, maxSwept int) (*Rule, *clocktest.Manual) {
	t.Helper()
	clk := clocktest.NewManual(time.Unix(1000, 0))
	cfg := DefaultConfig()
	cfg.Margin, cfg.MaxSwept = time.Second, maxSwept
	r, err := New(cfg, clk)
	if err != nil {
		t.Fatal(err)
	}
	r.Restart(0) // the first ring
	return r, clk
}

const span = int64(100 * time.Millisecond)

// Boundaries one nanosecond either side of span + margin, at the epoch the
// stretch began.
func TestRule_Rested_spanPlusMargin(t *testing.T) {
	r, clk := newRule(t, 0)
	clk.Advance(time.Second + time.Duration(span) - 1)
	if r.Rested(0, "k", span) {
		t.Fatal("rested 1ns before span + margin")
	}
	clk.Advance(1)
	if !r.Rested(0, "k", span) {
		t.Fatal("not rested at span + margin")
	}
	if r.Rested(0, "k", -1) {
		t.Fatal("rested with an unknown span")
	}
}

// Restart and a new epoch both begin a new stretch; a question at an older
// epoch is never rested and changes nothing.
func TestRule_Rested_restartAndEpoch(t *testing.T) {
	r, clk := newRule(t, 0)
	clk.Advance(10 * time.Second)
	r.Restart(0)
	if r.Rested(0, "k", span) {
		t.Fatal("rested just after Restart")
	}
	clk.Advance(2 * time.Second)
	if !r.Rested(0, "k", span) {
		t.Fatal("not rested long after Restart")
	}
	if r.Rested(1, "k", span) {
		t.Fatal("rested at the first question of a new epoch")
	}
	if r.Rested(0, "k", span) {
		t.Fatal("rested at an epoch older than the stretch's")
	}
	clk.Advance(2 * time.Second)
	if !r.Rested(1, "k", span) || r.Rested(0, "k", span) {
		t.Fatal("the new epoch's stretch did not take over")
	}
	r.Restart(0) // an older epoch keeps the stretch's, from now
	if r.Rested(1, "k", span) {
		t.Fatal("rested just after Restart at an older epoch")
	}
	clk.Advance(2 * time.Second)
	if !r.Rested(1, "k", span) {
		t.Fatal("Restart at an older epoch moved the stretch back")
	}
}

// A swept key is rested at its epoch whatever the span, with no stretch.
func TestRule_Swept_restsWithinTheSpan(t *testing.T) {
	r, _ := newRule(t, 4)
	r.Swept(0, "k")
	if !r.Rested(0, "k", -1) || r.Rested(0, "other", span) || r.SweptLen() != 1 {
		t.Fatal("the swept set did not answer")
	}
	if r.Rested(1, "k", -1) {
		t.Fatal("a key swept at epoch 0 rested at epoch 1")
	}
}

func TestConfig_Validate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []Config{{Margin: MinMargin - 1}, {Margin: MinMargin, MaxSwept: -1}} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v validated", c)
		}
	}
	if _, err := New(DefaultConfig(), nil); err == nil {
		t.Error("New without a clock")
	}
}

// Likely guesses with the longest span asked about so far.
func TestRule_Likely_guessesTheWidestSpan(t *testing.T) {
	r, clk := newRule(t, 0)
	clk.Advance(10 * time.Second)
	if r.Likely(0, "k") {
		t.Fatal("likely rested before any span was seen")
	}
	r.Rested(0, "a", span)
	r.Rested(0, "b", 20*int64(time.Second))
	if r.Likely(0, "k") {
		t.Fatal("likely rested within the widest span + margin")
	}
	clk.Advance(12 * time.Second)
	if !r.Likely(0, "k") || r.Likely(1, "k") {
		t.Fatal("Likely did not follow the widest span and the epoch")
	}
}

// Nothing rests before the first Restart (the owner's first ring), however
// long ago New was.
func TestRule_Rested_notBeforeTheFirstRing(t *testing.T) {
	clk := clocktest.NewManual(time.Unix(1000, 0))
	r, err := New(DefaultConfig(), clk)
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	if r.Rested(0, "k", span) || r.Rested(1, "k", span) || r.Likely(0, "k") {
		t.Fatal("rested before the first ring")
	}
	clk.StepBack(2 * time.Hour) // before New: still nothing
	if r.Rested(0, "k", span) || r.Likely(0, "k") {
		t.Fatal("rested before the first ring, on a clock stepped back")
	}
	clk.Advance(time.Hour)
	r.Restart(1)
	clk.Advance(DefaultConfig().Margin + time.Duration(span))
	if !r.Rested(1, "k", span) {
		t.Fatal("not rested span + margin after the first ring")
	}
}

// Hold (a ring that cannot be trusted: the node has not joined) rests
// nothing, not even a swept key, until the next Restart begins a stretch.
func TestRule_Hold_restsNothingUntilRestart(t *testing.T) {
	r, clk := newRule(t, 16)
	r.Swept(0, "swept")
	clk.Advance(time.Hour)
	if !r.Rested(0, "k", span) || !r.Rested(0, "swept", span) {
		t.Fatal("not rested after an hour of ownership")
	}
	r.Hold()
	clk.Advance(time.Hour)
	if r.Rested(0, "k", span) || r.Rested(0, "swept", span) || r.Rested(1, "k", span) {
		t.Fatal("rested while held")
	}
	r.Restart(1)
	clk.Advance(time.Second + time.Duration(span))
	if !r.Rested(1, "k", span) {
		t.Fatal("not rested span + margin after the Restart that ended the hold")
	}
}
