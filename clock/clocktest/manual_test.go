package clocktest_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/clock/clocktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Unix(1_700_000_000, 0)

// received returns the value waiting on c, if any, without blocking.
func received(c <-chan time.Time) (time.Time, bool) {
	select {
	case v := <-c:
		return v, true
	default:
		return time.Time{}, false
	}
}

func wantFired(t *testing.T, c <-chan time.Time, want time.Time) {
	t.Helper()
	got, ok := received(c)
	if !ok {
		t.Fatalf("nothing received, want %s", want)
	}
	if !got.Equal(want) {
		t.Fatalf("received %s, want %s", got, want)
	}
}

func wantQuiet(t *testing.T, c <-chan time.Time) {
	t.Helper()
	if got, ok := received(c); ok {
		t.Fatalf("received %s, want nothing", got)
	}
}

func TestManual_NewTimer_firesAtDeadline(t *testing.T) {
	for _, tc := range []struct {
		name    string
		d       time.Duration
		advance []time.Duration // fired must hold after each step
		fired   []bool
	}{
		{"1ns before", time.Second, []time.Duration{time.Second - time.Nanosecond}, []bool{false}},
		{"exactly at", time.Second, []time.Duration{time.Second}, []bool{true}},
		{"1ns after", time.Second, []time.Duration{time.Second + time.Nanosecond}, []bool{true}},
		{"in steps", time.Second, []time.Duration{500 * time.Millisecond, 499 * time.Millisecond, time.Millisecond}, []bool{false, false, true}},
		{"zero fires at once", 0, []time.Duration{0}, []bool{true}},
		{"negative fires at once", -time.Second, []time.Duration{0}, []bool{true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := clocktest.NewManual(t0)
			tm := m.NewTimer(tc.d)
			for i, step := range tc.advance {
				m.Advance(step)
				if !tc.fired[i] {
					wantQuiet(t, tm.C())
					continue
				}
				wantFired(t, tm.C(), t0.Add(tc.d)) // the deadline is sent
				m.Advance(time.Hour)
				wantQuiet(t, tm.C()) // once only
			}
		})
	}
}

func TestManual_Timer_StopReset(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, m *clocktest.Manual, tm clock.Timer)
	}{
		{"stop pending", func(t *testing.T, m *clocktest.Manual, tm clock.Timer) {
			if !tm.Stop() {
				t.Fatal("Stop of a pending timer = false")
			}
			if tm.Stop() {
				t.Fatal("second Stop = true")
			}
			m.Advance(time.Hour)
			wantQuiet(t, tm.C())
		}},
		{"stop after fire, value unread", func(t *testing.T, m *clocktest.Manual, tm clock.Timer) {
			m.Advance(time.Second)
			if !tm.Stop() { // as Go 1.23: the unreceived value is discarded
				t.Fatal("Stop with an unreceived value = false")
			}
			wantQuiet(t, tm.C())
		}},
		{"stop after fire, value read", func(t *testing.T, m *clocktest.Manual, tm clock.Timer) {
			m.Advance(time.Second)
			wantFired(t, tm.C(), t0.Add(time.Second))
			if tm.Stop() {
				t.Fatal("Stop after the value was received = true")
			}
		}},
		{"reset pending", func(t *testing.T, m *clocktest.Manual, tm clock.Timer) {
			m.Advance(500 * time.Millisecond)
			if !tm.Reset(time.Second) {
				t.Fatal("Reset of a pending timer = false")
			}
			m.Advance(999 * time.Millisecond) // past the old deadline, before the new
			wantQuiet(t, tm.C())
			m.Advance(time.Millisecond)
			wantFired(t, tm.C(), t0.Add(1500*time.Millisecond))
		}},
		{"reset after fire, value read", func(t *testing.T, m *clocktest.Manual, tm clock.Timer) {
			m.Advance(time.Second)
			wantFired(t, tm.C(), t0.Add(time.Second))
			if tm.Reset(time.Second) {
				t.Fatal("Reset of a fired timer = true")
			}
			m.Advance(time.Second)
			wantFired(t, tm.C(), t0.Add(2*time.Second))
		}},
		{"reset after fire, value unread", func(t *testing.T, m *clocktest.Manual, tm clock.Timer) {
			m.Advance(time.Second)
			if !tm.Reset(time.Second) {
				t.Fatal("Reset with an unreceived value = false")
			}
			wantQuiet(t, tm.C()) // the stale value is gone
			m.Advance(time.Second)
			wantFired(t, tm.C(), t0.Add(2*time.Second))
		}},
		{"reset after stop", func(t *testing.T, m *clocktest.Manual, tm clock.Timer) {
			tm.Stop()
			if tm.Reset(time.Second) {
				t.Fatal("Reset of a stopped timer = true")
			}
			m.Advance(time.Second)
			wantFired(t, tm.C(), t0.Add(time.Second))
		}},
		{"reset to zero fires at once", func(t *testing.T, m *clocktest.Manual, tm clock.Timer) {
			tm.Reset(0)
			wantFired(t, tm.C(), t0)
			m.Advance(time.Hour)
			wantQuiet(t, tm.C())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := clocktest.NewManual(t0)
			tc.run(t, m, m.NewTimer(time.Second))
		})
	}
}

func TestManual_Ticker_skipsMissedTicks(t *testing.T) {
	const p = time.Second
	m := clocktest.NewManual(t0)
	tk := m.NewTicker(p)
	defer tk.Stop()
	m.Advance(p - time.Nanosecond)
	wantQuiet(t, tk.C())
	m.Advance(time.Nanosecond)
	wantFired(t, tk.C(), t0.Add(p))
	m.Advance(p)
	wantFired(t, tk.C(), t0.Add(2*p))

	// A reader behind by several periods gets one tick, the first missed.
	m.Advance(3*p + p/2) // t0+5.5p
	wantFired(t, tk.C(), t0.Add(3*p))
	wantQuiet(t, tk.C())
	if got, want := m.Timers(), []time.Time{t0.Add(6 * p)}; len(got) != 1 || !got[0].Equal(want[0]) {
		t.Fatalf("Timers() = %v, want %v", got, want)
	}
	m.Advance(p / 2)
	wantFired(t, tk.C(), t0.Add(6*p))

	// An unread tick is not queued behind another.
	m.Advance(p)
	m.Advance(p)
	wantFired(t, tk.C(), t0.Add(7*p))
	wantQuiet(t, tk.C())
}

func TestManual_Ticker_StopReset(t *testing.T) {
	m := clocktest.NewManual(t0)
	tk := m.NewTicker(time.Second)
	m.Advance(time.Second)
	tk.Reset(3 * time.Second) // discards the unread tick, next at t0+4s
	wantQuiet(t, tk.C())
	m.Advance(2 * time.Second)
	wantQuiet(t, tk.C())
	m.Advance(time.Second)
	wantFired(t, tk.C(), t0.Add(4*time.Second))
	m.Advance(3 * time.Second)
	tk.Stop()
	wantQuiet(t, tk.C())
	if got := m.Timers(); len(got) != 0 {
		t.Fatalf("Timers() after Stop = %v", got)
	}
	m.Advance(time.Hour)
	wantQuiet(t, tk.C())
}

func TestManual_panics(t *testing.T) {
	for name, f := range map[string]func(m *clocktest.Manual){
		"Advance negative":      func(m *clocktest.Manual) { m.Advance(-time.Nanosecond) },
		"Set backwards":         func(m *clocktest.Manual) { m.Set(t0.Add(-time.Nanosecond)) },
		"StepBack negative":     func(m *clocktest.Manual) { m.StepBack(-time.Nanosecond) },
		"NewTicker zero":        func(m *clocktest.Manual) { m.NewTicker(0) },
		"Ticker.Reset zero":     func(m *clocktest.Manual) { m.NewTicker(time.Second).Reset(0) },
		"NewTicker negative":    func(m *clocktest.Manual) { m.NewTicker(-time.Second) },
		"Ticker.Reset negative": func(m *clocktest.Manual) { m.NewTicker(time.Second).Reset(-time.Second) },
	} {
		t.Run(name, func(t *testing.T) {
			m := clocktest.NewManual(t0)
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
				if !m.Now().Equal(t0) {
					t.Fatalf("Now() = %s after the refused call, want %s", m.Now(), t0)
				}
			}()
			f(m)
		})
	}
}

func TestManual_Set_firesDue(t *testing.T) {
	m := clocktest.NewManual(t0)
	a, b := m.NewTimer(2*time.Second), m.NewTimer(3*time.Second)
	m.Set(t0) // same time: allowed, fires nothing
	wantQuiet(t, a.C())
	m.Set(t0.Add(2 * time.Second))
	wantFired(t, a.C(), t0.Add(2*time.Second))
	wantQuiet(t, b.C())
	if got := m.Since(t0); got != 2*time.Second {
		t.Fatalf("Since(t0) = %s, want 2s", got)
	}
}

func TestManual_StepBack_keepsRemainingDurations(t *testing.T) {
	m := clocktest.NewManual(t0)
	tm := m.NewTimer(time.Second)
	m.Advance(400 * time.Millisecond)
	before := m.Now()
	m.StepBack(time.Minute)
	if got := m.Since(before); got != -time.Minute {
		t.Fatalf("Since(reading before the step) = %s, want -1m", got)
	}
	m.Advance(599 * time.Millisecond)
	wantQuiet(t, tm.C())
	m.Advance(time.Millisecond) // 1s of clock movement since NewTimer
	wantFired(t, tm.C(), t0.Add(time.Second-time.Minute))
}

func TestManual_Timers_listsPendingEarliestFirst(t *testing.T) {
	m := clocktest.NewManual(t0)
	m.NewTimer(3 * time.Second)
	stopped := m.NewTimer(time.Second)
	m.NewTicker(2 * time.Second)
	fired := m.NewTimer(time.Millisecond)
	stopped.Stop()
	m.Advance(time.Millisecond)
	wantFired(t, fired.C(), t0.Add(time.Millisecond))
	got := m.Timers()
	want := []time.Time{t0.Add(2 * time.Second), t0.Add(3 * time.Second)}
	if len(got) != len(want) || !got[0].Equal(want[0]) || !got[1].Equal(want[1]) {
		t.Fatalf("Timers() = %v, want %v", got, want)
	}
}

func TestManual_WaitForTimers_wakesOnArm(t *testing.T) {
	m := clocktest.NewManual(t0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- m.WaitForTimers(ctx, 2) }()
	m.NewTimer(time.Second)
	tm := m.NewTimer(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// a fired timer no longer counts; its Reset counts again
	m.Advance(time.Second)
	go func() { done <- m.WaitForTimers(ctx, 1) }()
	tm.Reset(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := len(m.Timers()); got != 1 {
		t.Fatalf("%d timers pending, want 1", got)
	}
}

func TestManual_WaitForTimers_contextEnds(t *testing.T) {
	m := clocktest.NewManual(t0)
	m.NewTimer(time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := m.WaitForTimers(ctx, 2)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitForTimers = %v, want context.Canceled", err)
	}
}

// TestManual_concurrentAdvanceAndNewTimer runs under -race: timers armed
// while another goroutine advances each fire exactly once, at their
// deadline.
func TestManual_concurrentAdvanceAndNewTimer(t *testing.T) {
	m := clocktest.NewManual(t0)
	const workers, each = 4, 200
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var adv sync.WaitGroup
	adv.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				m.Advance(time.Millisecond)
			}
		}
	})
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			var timers []clock.Timer
			var deadlines []time.Time
			for range each {
				d := time.Duration(rng.IntN(50)) * time.Millisecond
				start := m.Now()
				tm := m.NewTimer(d)
				if rng.IntN(4) == 0 {
					tm.Reset(d) // armed again from a later (or equal) now
				}
				timers = append(timers, tm)
				deadlines = append(deadlines, start.Add(d))
			}
			// wait until the advancer has passed every deadline
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for i, tm := range timers {
				select {
				case v := <-tm.C():
					if v.Before(deadlines[i]) {
						errs <- errors.New("fired before its deadline")
						return
					}
				case <-ctx.Done():
					errs <- ctx.Err()
					return
				}
				if _, ok := received(tm.C()); ok {
					errs <- errors.New("fired twice")
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	adv.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := m.Timers(); len(got) != 0 {
		t.Fatalf("%d timers still pending", len(got))
	}
}
