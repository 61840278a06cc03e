package writebehind_test

import (
	"slices"
	"testing"
	"time"

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
	if d := waitArmed(t, clk); d != cfg.FlushInterval {
		t.Fatalf("next flush in %s after a good one, want FlushInterval %s", d, cfg.FlushInterval)
	}
	if v, ok := sink.get("k"); !ok || v != 42 {
		t.Fatalf("k = %d (stored %v) after the first flush, want 42", v, ok)
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
		got = append(got, fireRun(t, clk))
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
	fireRun(t, clk)
	if d := waitArmed(t, clk); d != cfg.FlushInterval {
		t.Fatalf("pause after recovery %s, want FlushInterval %s", d, cfg.FlushInterval)
	}
	if v, ok := sink.get("k"); !ok || v != 42 {
		t.Fatalf("k = %d (stored %v) after recovery, want 42", v, ok)
	}
	if _, _, calls := sink.snapshot(); calls != 11 {
		t.Fatalf("%d sink calls, want 11: one per flush", calls)
	}
}
