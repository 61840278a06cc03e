package writebehind_test

import (
	"slices"
	"testing"
	"time"

	"github.com/weirhq/weir/clock/clocktest"
	"github.com/weirhq/weir/writebehind"
)

// TestWriter_Run_flushesAtExactlyTheInterval: with the default config, a
// mark is stored by the flush FlushInterval after Run starts, not 1ns
// earlier.
func TestWriter_Run_flushesAtExactlyTheInterval(t *testing.T) {
	cfg := writebehind.DefaultConfig()
	sink := newFakeSink()
	clk := newManual()
	w := newWriter(t, cfg, sink, newFakeNow(1).Now, nil, writebehind.WithClock(clk))
	runWriter(t, w)
	w.Mark("k", 42)
	if d := waitArmed(t, clk); d != cfg.FlushInterval {
		t.Fatalf("first flush in %s, want FlushInterval %s", d, cfg.FlushInterval)
	}
	clk.Advance(cfg.FlushInterval - time.Nanosecond)
	if got := clk.Timers(); len(got) != 1 || !got[0].Equal(clk.Now().Add(time.Nanosecond)) {
		t.Fatalf("1ns before the flush: pending timers %v, want Run's, 1ns ahead", got)
	}
	if _, _, calls := sink.snapshot(); calls != 0 {
		t.Fatalf("%d sink calls before FlushInterval passed", calls)
	}
	clk.Advance(time.Nanosecond)
	waitFlushed(t, clk, w)
	if v, ok := sink.get("k"); !ok || v != 42 {
		t.Fatalf("k = %d (stored %v) after the first flush, want 42", v, ok)
	}
	checkSleepsUntilMarked(t, clk, w, cfg)
}

// checkSleepsUntilMarked: with nothing pending Run arms no timer, however
// long the clock runs; the next mark arms it for FlushInterval from then,
// and that flush stores the mark.
func checkSleepsUntilMarked(t *testing.T, clk *clocktest.Manual, w *writebehind.Writer, cfg writebehind.Config) {
	t.Helper()
	waitFor(t, "Run to sleep with nothing pending", w.Sleeping)
	clk.Advance(time.Hour)
	if got := clk.Timers(); len(got) != 0 {
		t.Fatalf("nothing pending: timers %v armed, want none", got)
	}
	w.Mark("later", 7)
	if d := waitArmed(t, clk); d != cfg.FlushInterval {
		t.Fatalf("after a mark, the flush in %s, want FlushInterval %s", d, cfg.FlushInterval)
	}
	clk.Advance(cfg.FlushInterval)
	waitFlushed(t, clk, w)
	if w.Pending() != 0 {
		t.Fatalf("pending %d after the flush of the mark that woke Run", w.Pending())
	}
}

// TestWriter_Run_backoffDoublesToMaxThenResets: with the default config
// (5ms interval, 1s MaxBackoff), each failed flush doubles the pause from
// FlushInterval up to MaxBackoff; the first good flush restores
// FlushInterval.
func TestWriter_Run_backoffDoublesToMaxThenResets(t *testing.T) {
	cfg := writebehind.DefaultConfig()
	sink := newFakeSink()
	sink.setFailing(true)
	clk := newManual()
	w := newWriter(t, cfg, sink, newFakeNow(1).Now, nil, writebehind.WithClock(clk))
	runWriter(t, w)
	w.Mark("k", 42)
	var got []time.Duration
	for range 10 {
		got = append(got, fireRun(t, clk, w))
	}
	ms := time.Millisecond
	// the first pause is the interval, then one per failed flush
	want := []time.Duration{5 * ms, 5 * ms, 10 * ms, 20 * ms, 40 * ms, 80 * ms, 160 * ms, 320 * ms, 640 * ms, time.Second}
	if !slices.Equal(got, want) {
		t.Fatalf("pauses %v, want %v", got, want)
	}
	if d := waitArmed(t, clk); d != cfg.MaxBackoff {
		t.Fatalf("pause after ten failures %s, want MaxBackoff %s", d, cfg.MaxBackoff)
	}
	sink.setFailing(false)
	fireRun(t, clk, w)
	if v, ok := sink.get("k"); !ok || v != 42 {
		t.Fatalf("k = %d (stored %v) after recovery, want 42", v, ok)
	}
	if _, _, calls := sink.snapshot(); calls != 11 {
		t.Fatalf("%d sink calls, want 11: one per flush", calls)
	}
	checkSleepsUntilMarked(t, clk, w, cfg) // and the backoff is gone: FlushInterval
}
