package breaker

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

var errDep = errors.New("dependency failed")

// fakeClock is a manual clock; tests move it with advance and never sleep.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// recorder collects onChange calls.
type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) onChange(name string, from, to State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, fmt.Sprintf("%s:%s->%s", name, from, to))
}

func (r *recorder) transitions() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

func cfg(threshold int, openFor time.Duration, probes int) Config {
	return Config{FailureThreshold: threshold, OpenFor: openFor, HalfOpenProbes: probes}
}

// call makes one admitted call that reports err, failing the test if the
// breaker rejects it.
func call(t *testing.T, b *Breaker, err error) {
	t.Helper()
	done, aerr := b.Allow()
	if aerr != nil {
		t.Fatalf("Allow: %v, want admitted (state %s)", aerr, b.State())
	}
	done(err)
}

func wantState(t *testing.T, b *Breaker, want State) {
	t.Helper()
	if got := b.State(); got != want {
		t.Fatalf("State() = %s, want %s", got, want)
	}
}

func wantRejected(t *testing.T, b *Breaker) {
	t.Helper()
	done, err := b.Allow()
	if !errors.Is(err, ErrOpen) {
		t.Fatalf("Allow: err %v, want ErrOpen", err)
	}
	done(errDep) // a no-op: must not panic or change anything
}

// trip opens b, which must be closed with no failures counted.
func trip(t *testing.T, b *Breaker) {
	t.Helper()
	for range b.cfg.FailureThreshold {
		call(t, b, errDep)
	}
	wantState(t, b, Open)
}

func TestConfig_Validate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{"default", DefaultConfig(), false},
		{"minimal", cfg(1, time.Nanosecond, 1), false},
		{"max threshold", cfg(MaxFailureThreshold, time.Second, 1), false},
		{"zero", Config{}, true},
		{"zero threshold", cfg(0, time.Second, 1), true},
		{"threshold too big", cfg(MaxFailureThreshold+1, time.Second, 1), true},
		{"zero open for", cfg(5, 0, 1), true},
		{"negative open for", cfg(5, -time.Second, 1), true},
		{"zero probes", cfg(5, time.Second, 0), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); (err != nil) != tc.wantErr {
				t.Errorf("Validate() = %v, want error %v", err, tc.wantErr)
			}
		})
	}
}

func TestDefaultConfig(t *testing.T) {
	if got, want := DefaultConfig(), cfg(5, time.Second, 1); got != want {
		t.Errorf("DefaultConfig() = %+v, want %+v", got, want)
	}
}

func TestState_String(t *testing.T) {
	for s, want := range map[State]string{Closed: "closed", Open: "open", HalfOpen: "half_open", State(7): "unknown"} {
		if got := s.String(); got != want {
			t.Errorf("State(%d).String() = %q, want %q", int(s), got, want)
		}
	}
}

func TestNew_panics(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		now  func() time.Time
	}{
		{"invalid config", Config{}, time.Now},
		{"nil clock", DefaultConfig(), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("New did not panic")
				}
			}()
			New("x", tc.cfg, tc.now, nil)
		})
	}
}

func TestBreaker_done_consecutiveFailures(t *testing.T) {
	ok, bad := error(nil), errDep
	tests := []struct {
		name      string
		threshold int
		outcomes  []error
		want      State
	}{
		{"threshold 1 opens on first failure", 1, []error{bad}, Open},
		{"one short of threshold", 3, []error{bad, bad}, Closed},
		{"exactly threshold", 3, []error{bad, bad, bad}, Open},
		{"success resets the count", 3, []error{bad, bad, ok, bad, bad}, Closed},
		{"threshold after the reset", 3, []error{bad, bad, ok, bad, bad, bad}, Open},
		{"only successes", 3, []error{ok, ok, ok, ok}, Closed},
		{"default threshold", 5, []error{bad, bad, bad, bad, bad}, Open},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := New("r", cfg(tc.threshold, time.Second, 1), newFakeClock().now, nil)
			for _, err := range tc.outcomes {
				call(t, b, err)
			}
			wantState(t, b, tc.want)
			if tc.want == Open {
				wantRejected(t, b)
			}
		})
	}
}

func TestBreaker_Allow_openFor(t *testing.T) {
	const openFor = 250 * time.Millisecond
	tests := []struct {
		name    string
		elapsed time.Duration
		admit   bool
	}{
		{"at once", 0, false},
		{"one microsecond before", openFor - time.Microsecond, false},
		{"exactly", openFor, true},
		{"one microsecond after", openFor + time.Microsecond, true},
		{"long after", time.Hour, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			b := New("r", cfg(2, openFor, 1), clk.now, nil)
			trip(t, b)
			clk.advance(tc.elapsed)
			done, err := b.Allow()
			if tc.admit {
				if err != nil {
					t.Fatalf("Allow after %v: %v, want a probe", tc.elapsed, err)
				}
				wantState(t, b, HalfOpen)
				done(nil)
				wantState(t, b, Closed)
				return
			}
			if !errors.Is(err, ErrOpen) {
				t.Fatalf("Allow after %v: %v, want ErrOpen", tc.elapsed, err)
			}
			wantState(t, b, Open)
		})
	}
}

func TestBreaker_Allow_clockBackwards(t *testing.T) {
	clk := newFakeClock()
	b := New("r", cfg(1, time.Second, 1), clk.now, nil)
	trip(t, b)
	clk.advance(-time.Hour)
	wantRejected(t, b)
	clk.advance(time.Hour + time.Second - time.Microsecond)
	wantRejected(t, b)
	clk.advance(time.Microsecond)
	call(t, b, nil)
	wantState(t, b, Closed)
}

func TestBreaker_Allow_halfOpenProbes(t *testing.T) {
	for _, probes := range []int{1, 2, 5} {
		t.Run(fmt.Sprint(probes), func(t *testing.T) {
			clk := newFakeClock()
			b := New("r", cfg(1, time.Second, probes), clk.now, nil)
			trip(t, b)
			clk.advance(time.Second)
			var dones []func(error)
			for i := range probes {
				done, err := b.Allow()
				if err != nil {
					t.Fatalf("probe %d: %v", i, err)
				}
				dones = append(dones, done)
			}
			wantRejected(t, b)
			clk.advance(time.Hour) // time does not free probe slots
			wantRejected(t, b)
			for _, done := range dones {
				wantState(t, b, HalfOpen)
				done(nil)
			}
			wantState(t, b, Closed)
		})
	}
}

// A successful probe frees its slot; closing takes HalfOpenProbes successes
// in total, and a probe still in flight when it closes no longer counts.
func TestBreaker_Allow_successFreesProbeSlot(t *testing.T) {
	clk := newFakeClock()
	b := New("r", cfg(1, time.Second, 2), clk.now, nil)
	trip(t, b)
	clk.advance(time.Second)
	doneA, errA := b.Allow()
	doneB, errB := b.Allow()
	if errA != nil || errB != nil {
		t.Fatalf("probes: %v, %v", errA, errB)
	}
	wantRejected(t, b)
	doneA(nil)
	doneC, errC := b.Allow()
	if errC != nil {
		t.Fatalf("probe after a success: %v", errC)
	}
	wantRejected(t, b)
	doneB(nil)
	wantState(t, b, Closed)
	doneC(errDep) // from the half-open period: ignored
	wantState(t, b, Closed)
	call(t, b, nil)
}

func TestBreaker_done_probeFailureReopens(t *testing.T) {
	const openFor = time.Second
	tests := []struct {
		name     string
		probes   int
		outcomes []error // of the probes, in order; the last one fails
	}{
		{"single probe", 1, []error{errDep}},
		{"first of three", 3, []error{errDep}},
		{"after two successes", 3, []error{nil, nil, errDep}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			rec := &recorder{}
			b := New("r", cfg(1, openFor, tc.probes), clk.now, rec.onChange)
			trip(t, b)
			clk.advance(openFor)
			var dones []func(error)
			for range tc.probes {
				done, err := b.Allow()
				if err != nil {
					t.Fatal(err)
				}
				dones = append(dones, done)
			}
			for i, err := range tc.outcomes {
				dones[i](err)
			}
			wantState(t, b, Open)
			for _, done := range dones {
				done(nil) // the rest report late: ignored
			}
			wantState(t, b, Open)
			// Open for another full OpenFor from the failure.
			clk.advance(openFor - time.Microsecond)
			wantRejected(t, b)
			clk.advance(time.Microsecond)
			done, err := b.Allow()
			if err != nil {
				t.Fatalf("probe after reopening: %v", err)
			}
			wantState(t, b, HalfOpen)
			done(nil)
			want := []string{"r:closed->open", "r:open->half_open", "r:half_open->open", "r:open->half_open"}
			if tc.probes == 1 {
				want = append(want, "r:half_open->closed")
			}
			if got := rec.transitions(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("transitions %v, want %v", got, want)
			}
		})
	}
}

func TestBreaker_done_twice(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, b *Breaker, clk *fakeClock)
	}{
		{"closed failure counts once", func(t *testing.T, b *Breaker, _ *fakeClock) {
			done, _ := b.Allow()
			done(errDep)
			done(errDep)
			wantState(t, b, Closed) // threshold 2: one failure so far
			call(t, b, errDep)
			wantState(t, b, Open)
		}},
		{"closed success then failure", func(t *testing.T, b *Breaker, _ *fakeClock) {
			call(t, b, errDep)
			done, _ := b.Allow()
			done(nil)
			done(errDep)
			call(t, b, errDep)
			wantState(t, b, Closed) // the reset stands; one failure since
		}},
		{"probe success counts once", func(t *testing.T, b *Breaker, clk *fakeClock) {
			trip(t, b)
			clk.advance(time.Second)
			done, err := b.Allow()
			if err != nil {
				t.Fatal(err)
			}
			done(nil)
			done(nil)
			wantState(t, b, HalfOpen) // two probes: one success so far
		}},
		{"probe failure after success ignored", func(t *testing.T, b *Breaker, clk *fakeClock) {
			trip(t, b)
			clk.advance(time.Second)
			done, _ := b.Allow()
			done(nil)
			done(errDep)
			wantState(t, b, HalfOpen)
			call(t, b, nil)
			wantState(t, b, Closed)
		}},
		{"rejected done is a no-op", func(t *testing.T, b *Breaker, _ *fakeClock) {
			trip(t, b)
			done, err := b.Allow()
			if !errors.Is(err, ErrOpen) {
				t.Fatal(err)
			}
			done(nil)
			done(nil)
			wantState(t, b, Open)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			tc.run(t, New("r", cfg(2, time.Second, 2), clk.now, nil), clk)
		})
	}
}

// Outcomes of calls admitted in an earlier period are ignored.
func TestBreaker_done_stale(t *testing.T) {
	clk := newFakeClock()
	b := New("r", cfg(1, time.Second, 1), clk.now, nil)
	slowA, _ := b.Allow() // admitted while closed, reports while half-open
	slowB, _ := b.Allow() // admitted while closed, reports after reclosing
	trip(t, b)
	clk.advance(time.Second)
	probe, err := b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	slowA(errDep)
	wantState(t, b, HalfOpen)
	probe(nil)
	wantState(t, b, Closed)
	slowB(errDep)
	wantState(t, b, Closed)
}

func TestBreaker_onChange(t *testing.T) {
	clk := newFakeClock()
	rec := &recorder{}
	b := New("redis-a", cfg(2, time.Second, 1), clk.now, rec.onChange)
	trip(t, b)
	wantRejected(t, b)
	clk.advance(time.Second)
	call(t, b, errDep)
	clk.advance(time.Second)
	call(t, b, nil)
	call(t, b, nil)
	want := []string{
		"redis-a:closed->open",
		"redis-a:open->half_open",
		"redis-a:half_open->open",
		"redis-a:open->half_open",
		"redis-a:half_open->closed",
	}
	if got := rec.transitions(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("transitions\n got %v\nwant %v", got, want)
	}
}

// onChange may read State: it is called after the state is stored.
func TestBreaker_onChange_seesNewState(t *testing.T) {
	var b *Breaker
	var seen []State
	b = New("r", cfg(1, time.Second, 1), newFakeClock().now, func(_ string, _, to State) {
		seen = append(seen, b.State(), to)
	})
	call(t, b, errDep)
	if fmt.Sprint(seen) != fmt.Sprint([]State{Open, Open}) {
		t.Errorf("State() inside onChange: %v", seen)
	}
}
