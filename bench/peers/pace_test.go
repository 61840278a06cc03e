package main

import (
	"context"
	"sync"
	"testing"
	"time"
)

func TestDueAt(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		i    int64
		rate float64
		want time.Duration
	}{
		{0, 2000, 0},
		{1, 2000, 500 * time.Microsecond},
		{2000, 2000, time.Second},
		{10_001, 2000, 5*time.Second + 500*time.Microsecond},
		{1, 3, 333_333_333},
		{3, 3, time.Second},
	} {
		if got := dueAt(t0, c.i, c.rate).Sub(t0); got != c.want {
			t.Errorf("dueAt(%d at %v/s) = start + %v, want + %v", c.i, c.rate, got, c.want)
		}
	}
}

func TestDispatch_handsOutEverySlotBeforeEnd(t *testing.T) {
	start := time.Now()
	end := start.Add(100 * time.Millisecond)
	jobs := make(chan time.Time)
	var got []time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		for due := range jobs {
			got = append(got, due)
		}
	}()
	missed := dispatch(context.Background(), start, start, end, 200, jobs) // one slot per 5ms
	close(jobs)
	<-done
	// A receiver is always ready, so only a slot whose time the loaded
	// machine let pass beyond the end is dropped.
	if int64(len(got))+missed != 20 || len(got) < 10 {
		t.Fatalf("%d slots handed out and %d missed in 100ms at 200/s, want 20 in all, most handed out", len(got), missed)
	}
	for i, due := range got {
		if want := dueAt(start, int64(i), 200); !due.Equal(want) {
			t.Errorf("slot %d due %v, want %v", i, due.Sub(start), want.Sub(start))
		}
	}
	if since := time.Since(start); since < 95*time.Millisecond {
		t.Errorf("dispatch returned after %v: it did not wait for the slots' times", since)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	blocked := make(chan time.Time) // nobody receives
	returned := make(chan struct{})
	go func() {
		dispatch(ctx, time.Now(), time.Now(), time.Now().Add(time.Hour), 1000, blocked)
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("dispatch did not return when its context ended")
	}
}

func TestRunPaced_countsTheMeasuredSlots(t *testing.T) {
	d := &countingDecider{admit: 1 << 30, failEvery: 10}
	cfg := loadConfig{warmup: 50 * time.Millisecond, duration: 200 * time.Millisecond, timeout: time.Second}
	win := &recordingWindow{}
	r := runPaced(context.Background(), cfg, pacing{rate: 1000, inFlight: 8}, workload{name: "p", keys: 20, limit: benchLimit}, []decider{d}, win)

	// Slots 50..249 are due in the measured 200ms, 0..49 in the warm-up.
	// Each measured slot is sent and counted, or (on a loaded machine, at
	// the end) dropped and counted late; a late one may also be sent.
	sent := r.decisions + r.errors
	if sent > 200 || sent+r.late < 200 || sent < 100 {
		t.Errorf("counted %d sent and %d late, want the 200 slots after the warm-up, most of them sent", sent, r.late)
	}
	if int64(d.calls) != 50+sent {
		t.Errorf("the decider got %d calls, want the 50 warm-up slots and the %d counted", d.calls, sent)
	}
	if r.errors < sent/10-1 || r.errors > sent/10+1 {
		t.Errorf("%d errors of %d sent, want the one in 10 injected", r.errors, sent)
	}
	if r.oneKey || len(r.spans) != 0 || r.limit != benchLimit {
		t.Errorf("oneKey %v, %d spans, limit %v on a 20-key workload", r.oneKey, len(r.spans), r.limit)
	}
	if rate := r.rate(); rate < 500 || rate > 1100 {
		t.Errorf("achieved %.0f/s on a schedule of 1000/s with an instant decider", rate)
	}
	if win.began != 1 || win.ended != 1 {
		t.Errorf("window began %d, ended %d times, want once each", win.began, win.ended)
	}
}

// slowDecider answers after delay, like a server that takes that long, and
// records the most calls it had at once.
type slowDecider struct {
	delay   time.Duration
	mu      sync.Mutex
	now     int
	maxSeen int
}

func (d *slowDecider) decide(ctx context.Context, _ string) (bool, error) {
	d.mu.Lock()
	d.now++
	d.maxSeen = max(d.maxSeen, d.now)
	d.mu.Unlock()
	defer func() { d.mu.Lock(); d.now--; d.mu.Unlock() }()
	select {
	case <-time.After(d.delay):
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

func TestRunPaced_boundsInFlightAndCountsLate(t *testing.T) {
	d := &slowDecider{delay: 20 * time.Millisecond}
	cfg := loadConfig{duration: 200 * time.Millisecond, timeout: time.Second}
	r := runPaced(context.Background(), cfg, pacing{rate: 1000, inFlight: 2}, workload{name: "p", keys: 1, limit: benchLimit}, []decider{d}, nil)

	if d.maxSeen > 2 {
		t.Errorf("%d decisions outstanding at once, want at most the 2 allowed", d.maxSeen)
	}
	// Two at a time, 20ms each, is at most 100/s: far behind 1000/s.
	if r.decisions > 40 || r.decisions == 0 {
		t.Errorf("%d decisions in 200ms at most 2 in flight of 20ms each", r.decisions)
	}
	// 200 slots: the few sent on time are not late, every other one is
	// (sent behind, or dropped at the end).
	if r.late < 150 || r.late > 200 {
		t.Errorf("late %d of 200 slots (%d decided): want those sent behind schedule or never counted", r.late, r.decisions)
	}
	if elapsed := r.window; elapsed > cfg.duration+time.Second {
		t.Errorf("window %v: the run must end near its duration %v, dropping slots it cannot send", elapsed, cfg.duration)
	}
	if !r.oneKey || int64(len(r.spans)) != r.admitted {
		t.Errorf("one key: oneKey %v, %d spans for %d admitted", r.oneKey, len(r.spans), r.admitted)
	}
}

// recordingWindow counts the edges it was told of.
type recordingWindow struct {
	mu            sync.Mutex
	began, ended  int
	endBeforeOpen bool
	opened        chan struct{} // closed at begin, if not nil
}

func (w *recordingWindow) begin() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.began++
	if w.opened != nil {
		close(w.opened)
	}
}
func (w *recordingWindow) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.began == 0 {
		w.endBeforeOpen = true
	}
	w.ended++
}

func TestMarkWindow(t *testing.T) {
	w := &recordingWindow{opened: make(chan struct{})}
	finish := markWindow(time.Now().Add(10*time.Millisecond), w)
	<-w.opened // the run outlasts its warm-up
	finish()
	if w.began != 1 || w.ended != 1 || w.endBeforeOpen {
		t.Errorf("began %d, ended %d, end before begin %v", w.began, w.ended, w.endBeforeOpen)
	}

	cut := &recordingWindow{}
	markWindow(time.Now().Add(time.Hour), cut)()
	if cut.began != 0 || cut.ended != 0 {
		t.Errorf("a run cut short in its warm-up: began %d, ended %d, want neither", cut.began, cut.ended)
	}
	markWindow(time.Now(), nil)() // nil marks nothing
}
