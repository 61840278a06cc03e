package breaker

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

var errDep = errors.New("dependency failed")

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

// cfg is a config with only the consecutive rule in play (the rate rule
// needs more calls than any test makes) unless a test sets it.
func cfg(consecutive int, openFor time.Duration, probes int) Config {
	c := DefaultConfig()
	c.ConsecutiveFailures, c.OpenFor, c.HalfOpenProbes = consecutive, openFor, probes
	c.Window, c.MinRequests = time.Hour, 1<<30
	return c
}

func newBreaker(t testing.TB, c Config, onChange func(string, State, State)) *Breaker {
	t.Helper()
	b, err := New("r", c, onChange)
	if err != nil {
		t.Fatal(err)
	}
	return b
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

// shortOpen is the OpenFor of tests that wait for the half-open state on
// the real clock: short enough to wait for, long enough that an open
// breaker is still open when the test looks right after tripping it.
const shortOpen = 100 * time.Millisecond

// trip opens b, which must be closed with no failures counted. With a
// short OpenFor the breaker may be half-open by the time it is looked at.
func trip(t *testing.T, b *Breaker, consecutive int) {
	t.Helper()
	for range consecutive {
		call(t, b, errDep)
	}
	if got := b.State(); got == Closed {
		t.Fatalf("State() = %s after %d failures, want open", got, consecutive)
	}
}

// waitHalfOpen waits, on the real clock gobreaker reads, until b's OpenFor
// has passed. Tests that use it set OpenFor to a millisecond or so.
func waitHalfOpen(t *testing.T, b *Breaker) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for b.State() != HalfOpen {
		if time.Now().After(deadline) {
			t.Fatalf("still %s after 10s", b.State())
		}
		<-tick.C
	}
}

func TestConfig_Validate(t *testing.T) {
	with := func(f func(*Config)) Config {
		c := DefaultConfig()
		f(&c)
		return c
	}
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{"default", DefaultConfig(), false},
		{"minimal", cfg(1, time.Nanosecond, 1), false},
		{"rate 1", with(func(c *Config) { c.FailureRate = 1 }), false},
		{"zero", Config{}, true},
		{"zero consecutive", with(func(c *Config) { c.ConsecutiveFailures = 0 }), true},
		{"consecutive too big", with(func(c *Config) { c.ConsecutiveFailures = 1 << 32 }), true},
		{"window too short", with(func(c *Config) { c.Window = 9 }), true},
		{"zero min requests", with(func(c *Config) { c.MinRequests = 0 }), true},
		{"zero rate", with(func(c *Config) { c.FailureRate = 0 }), true},
		{"rate above 1", with(func(c *Config) { c.FailureRate = 1.5 }), true},
		{"NaN rate", with(func(c *Config) { c.FailureRate = nan() }), true},
		{"zero open for", with(func(c *Config) { c.OpenFor = 0 }), true},
		{"negative open for", with(func(c *Config) { c.OpenFor = -time.Second }), true},
		{"zero probes", with(func(c *Config) { c.HalfOpenProbes = 0 }), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.cfg
			if err := tc.cfg.Validate(); (err != nil) != tc.wantErr {
				t.Errorf("Validate() = %v, want error %v", err, tc.wantErr)
			}
			if before != tc.cfg && tc.name != "NaN rate" {
				t.Error("Validate changed the config")
			}
		})
	}
}

func nan() float64 { zero := 0.0; return zero / zero }

func TestDefaultConfig(t *testing.T) {
	want := Config{ConsecutiveFailures: 5, Window: 10 * time.Second, MinRequests: 20, FailureRate: 0.5, OpenFor: time.Second, HalfOpenProbes: 1}
	if got := DefaultConfig(); got != want {
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

func TestNew_invalidConfig(t *testing.T) {
	if b, err := New("x", Config{}, nil); err == nil || b != nil {
		t.Fatalf("New(zero config) = %v, %v; want an error", b, err)
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
		{"excused calls neither count nor reset", 3, []error{bad, ErrExcused, bad, ErrExcused, bad}, Open},
		{"only excused calls", 1, []error{ErrExcused, fmt.Errorf("wrapped: %w", ErrExcused)}, Closed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBreaker(t, cfg(tc.threshold, time.Hour, 1), nil)
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

// The rate rule: a dependency that fails often but not in an unbroken row
// opens the breaker once enough calls finished; isolated failures of a
// dependency that otherwise answers never do.
func TestBreaker_done_failureRate(t *testing.T) {
	pattern := func(n, every int) []bool { // true = failure, every every-th call
		fails := make([]bool, n)
		for i := range fails {
			fails[i] = (i+1)%every == 0
		}
		return fails
	}
	tests := []struct {
		name  string
		fails []bool
		want  State
	}{
		{"half failing, at min requests", pattern(10, 2), Open},
		{"half failing, one short of min requests", pattern(9, 2), Closed},
		{"a third failing", pattern(30, 3), Closed},
		{"one in ten failing for long", pattern(200, 10), Closed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg(4, time.Hour, 1)
			c.MinRequests, c.FailureRate = 10, 0.5
			b := newBreaker(t, c, nil)
			for _, fail := range tc.fails {
				err := error(nil)
				if fail {
					err = errDep
				}
				call(t, b, err)
			}
			wantState(t, b, tc.want)
		})
	}
}

// Excused calls do not count toward the minimum of the rate rule.
func TestBreaker_done_excusedNotInRate(t *testing.T) {
	c := cfg(100, time.Hour, 1)
	c.MinRequests, c.FailureRate = 4, 0.5
	b := newBreaker(t, c, nil)
	for range 50 {
		call(t, b, ErrExcused)
	}
	call(t, b, errDep)
	call(t, b, nil)
	call(t, b, errDep)
	wantState(t, b, Closed) // 3 counted calls, under the minimum of 4
	call(t, b, nil)         // 4 counted; the rule is checked on failures
	call(t, b, errDep)
	wantState(t, b, Open)
}

func TestBreaker_Allow_openFor(t *testing.T) {
	b := newBreaker(t, cfg(2, time.Hour, 1), nil)
	trip(t, b, 2)
	for range 3 {
		wantRejected(t, b)
	}
	wantState(t, b, Open)

	b = newBreaker(t, cfg(2, shortOpen, 1), nil)
	trip(t, b, 2)
	waitHalfOpen(t, b)
	call(t, b, nil)
	wantState(t, b, Closed)
}

func TestBreaker_Allow_halfOpenProbes(t *testing.T) {
	for _, probes := range []int{1, 2, 5} {
		t.Run(fmt.Sprint(probes), func(t *testing.T) {
			b := newBreaker(t, cfg(1, shortOpen, probes), nil)
			trip(t, b, 1)
			waitHalfOpen(t, b)
			var dones []func(error)
			for i := range probes {
				done, err := b.Allow()
				if err != nil {
					t.Fatalf("probe %d: %v", i, err)
				}
				dones = append(dones, done)
			}
			wantRejected(t, b)
			for _, done := range dones {
				wantState(t, b, HalfOpen)
				done(nil)
			}
			wantState(t, b, Closed)
		})
	}
}

// An excused probe frees its slot without closing or reopening.
func TestBreaker_done_excusedProbe(t *testing.T) {
	b := newBreaker(t, cfg(1, shortOpen, 1), nil)
	trip(t, b, 1)
	waitHalfOpen(t, b)
	call(t, b, fmt.Errorf("caller gave up: %w", ErrExcused))
	wantState(t, b, HalfOpen)
	call(t, b, nil)
	wantState(t, b, Closed)
}

func TestBreaker_done_probeFailureReopens(t *testing.T) {
	rec := &recorder{}
	b := newBreaker(t, cfg(1, shortOpen, 3), rec.onChange)
	trip(t, b, 1)
	waitHalfOpen(t, b)
	var dones []func(error)
	for range 3 {
		done, err := b.Allow()
		if err != nil {
			t.Fatal(err)
		}
		dones = append(dones, done)
	}
	dones[0](nil)
	dones[1](errDep)
	dones[2](nil) // reports late: ignored
	if st := b.State(); st == Closed {
		t.Fatal("a late probe success closed a reopened breaker")
	}
	// The breaker may be half-open again if the test was descheduled for
	// OpenFor; what happened up to then is fixed.
	want := []string{"r:closed->open", "r:open->half_open", "r:half_open->open"}
	if got := rec.transitions(); len(got) < len(want) || fmt.Sprint(got[:len(want)]) != fmt.Sprint(want) {
		t.Errorf("transitions %v, want them to start %v", got, want)
	}
}

func TestBreaker_done_twice(t *testing.T) {
	b := newBreaker(t, cfg(2, time.Hour, 1), nil)
	done, _ := b.Allow()
	done(errDep)
	done(errDep)
	wantState(t, b, Closed) // threshold 2: one failure so far
	call(t, b, errDep)
	wantState(t, b, Open)

	b = newBreaker(t, cfg(2, time.Hour, 1), nil)
	call(t, b, errDep)
	done, _ = b.Allow()
	done(nil)
	done(errDep)
	call(t, b, errDep)
	wantState(t, b, Closed) // the reset stands; one failure since
}

// Outcomes of calls admitted before a transition are ignored.
func TestBreaker_done_stale(t *testing.T) {
	b := newBreaker(t, cfg(1, shortOpen, 1), nil)
	slowA, _ := b.Allow() // admitted while closed, reports while half-open
	slowB, _ := b.Allow() // admitted while closed, reports after reclosing
	trip(t, b, 1)
	waitHalfOpen(t, b)
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
	rec := &recorder{}
	b, err := New("redis-a", cfg(2, shortOpen, 1), rec.onChange)
	if err != nil {
		t.Fatal(err)
	}
	trip(t, b, 2)
	waitHalfOpen(t, b)
	call(t, b, errDep)
	waitHalfOpen(t, b)
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
	if b.Name() != "redis-a" {
		t.Errorf("Name() = %q", b.Name())
	}
}
