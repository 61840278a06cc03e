package redisclock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/clock/clocktest"
	"github.com/weirhq/weir/redisclock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is a local clock that moves only when told to: a manual
// clock whose Set, unlike Manual's, also moves it back (one setter at a
// time).
type fakeClock struct{ *clocktest.Manual }

// newFakeClock starts at ns Unix nanoseconds.
func newFakeClock(ns int64) *fakeClock { return &fakeClock{clocktest.NewManual(time.Unix(0, ns))} }

// Set moves the clock to ns Unix nanoseconds, back (StepBack) or forward.
func (f *fakeClock) Set(ns int64) {
	t := time.Unix(0, ns)
	if back := f.Now().Sub(t); back > 0 {
		f.StepBack(back)
		return
	}
	f.Manual.Set(t)
}

// step is one scripted TIME answer: the local clock reads t1 when it
// returns, and it returns redis or err. Times are Unix nanoseconds.
type step struct {
	t1    int64
	redis int64
	err   error
}

// fakeSource answers TIME from a script, moving the fake clock to each
// step's t1 as if the command took that long. Past the script it fails.
type fakeSource struct {
	clock *fakeClock
	mu    sync.Mutex
	steps []step
	calls int
}

func (s *fakeSource) Time(ctx context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls >= len(s.steps) {
		s.calls++
		return 0, errors.New("fake: script exhausted")
	}
	st := s.steps[s.calls]
	s.calls++
	s.clock.Set(st.t1)
	return st.redis, st.err
}

func (s *fakeSource) push(steps ...step) {
	s.mu.Lock()
	s.steps = append(s.steps, steps...)
	s.mu.Unlock()
}

func cfgSamples(n int) redisclock.Config {
	cfg := redisclock.DefaultConfig()
	cfg.Samples = n
	return cfg
}

func TestClock_Sync_offsetFromOneSample(t *testing.T) {
	tests := []struct {
		name           string
		t0, redis, t1  int64
		wantOffset     int64
		wantRTTSeconds float64
	}{
		{"zero rtt", 1_000_000, 5_000_000, 1_000_000, 4_000_000, 0},
		{"redis ahead", 1_000_000_000, 1_000_550_000, 1_000_100_000, 500_000, 100e-6},
		{"redis behind", 10_000_000_000, 7_000_000_000, 10_000_200_000, -3_000_100_000, 200e-6},
		{"odd rtt truncates the midpoint", 1_000, 1_000, 1_101, -50, 101e-9},
		{"equal clocks", 1_767_225_600_000_000_000, 1_767_225_600_000_250_000, 1_767_225_600_000_500_000, 0, 500e-6},
		{"one nanosecond apart", 1_767_225_600_000_000_000, 1_767_225_600_000_000_001, 1_767_225_600_000_000_000, 1, 0},
		{"sub-microsecond rtt", 1_767_225_600_000_000_000, 1_767_225_600_000_900_000, 1_767_225_600_000_000_300, 899_850, 300e-9},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock(tc.t0)
			src := &fakeSource{clock: clk, steps: []step{{t1: tc.t1, redis: tc.redis}}}
			reg := prometheus.NewRegistry()
			c := mustNew(t, cfgSamples(1), src, clk, reg)
			if c.Synced() {
				t.Fatal("synced before Sync")
			}
			if err := c.Sync(t.Context()); err != nil {
				t.Fatalf("sync: %v", err)
			}
			if got, want := c.Offset(), time.Duration(tc.wantOffset); got != want {
				t.Errorf("offset = %s, want %s", got, want)
			}
			if got, want := c.Now(), tc.t1+tc.wantOffset; got != want {
				t.Errorf("Now = %d, want %d", got, want)
			}
			if !c.Synced() {
				t.Error("not synced after a good Sync")
			}
			if got := testutil.ToFloat64(gauge(t, reg, "weir_redis_clock_rtt_seconds")); got != tc.wantRTTSeconds {
				t.Errorf("rtt gauge = %g, want %g", got, tc.wantRTTSeconds)
			}
			if got, want := testutil.ToFloat64(gauge(t, reg, "weir_redis_clock_offset_seconds")), time.Duration(tc.wantOffset).Seconds(); got != want {
				t.Errorf("offset gauge = %g, want %g", got, want)
			}
		})
	}
}

// gauge finds a registered metric by name and returns it as a collector
// for testutil.
func gauge(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			v := mf.GetMetric()[0]
			var x float64
			switch {
			case v.GetGauge() != nil:
				x = v.GetGauge().GetValue()
			case v.GetCounter() != nil:
				x = v.GetCounter().GetValue()
			}
			g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "copy"})
			g.Set(x)
			return g
		}
	}
	t.Fatalf("metric %s not registered", name)
	return nil
}

func TestClock_Sync_choosesLowestRTT(t *testing.T) {
	clk := newFakeClock(1_000_000)
	// Back-to-back samples: each starts where the previous ended.
	src := &fakeSource{clock: clk, steps: []step{
		{t1: 1_300_000, redis: 9_999_000},               // rtt 300us, offset 9_999_000-1_150_000 = 8_849_000
		{t1: 1_350_000, redis: 1_325_000 + 7_000_000},   // rtt 50us, offset 7ms
		{t1: 1_550_000, redis: 1_450_000 + 123_456_000}, // rtt 200us, offset 123.456ms
	}}
	c := mustNew(t, cfgSamples(3), src, clk, nil)
	if err := c.Sync(t.Context()); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if got := c.Offset(); got != 7_000*time.Microsecond {
		t.Errorf("offset = %s, want 7ms from the 50us sample", got)
	}
	if src.calls != 3 {
		t.Errorf("%d TIME calls, want 3", src.calls)
	}
}

func TestClock_Sync_failedSamplesSkipped(t *testing.T) {
	clk := newFakeClock(1_000_000)
	boom := errors.New("boom")
	src := &fakeSource{clock: clk, steps: []step{
		{t1: 1_010_000, err: boom}, // fast but failed: must not count
		{t1: 1_210_000, redis: 1_110_000 + 42_000},
		{t1: 1_220_000, err: boom},
	}}
	c := mustNew(t, cfgSamples(3), src, clk, nil)
	if err := c.Sync(t.Context()); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if got := c.Offset(); got != 42*time.Microsecond {
		t.Errorf("offset = %s, want 42us", got)
	}
}

func TestClock_Sync_errorKeepsOffset(t *testing.T) {
	clk := newFakeClock(1_000_000)
	boom := errors.New("redis down")
	src := &fakeSource{clock: clk, steps: []step{{t1: 1_000_000, redis: 6_000_000}, {t1: 1_000_000, err: boom}}}
	reg := prometheus.NewRegistry()
	c := mustNew(t, cfgSamples(2), src, clk, reg)
	if err := c.Sync(t.Context()); err != nil { // one of two samples failed: still a sync
		t.Fatalf("sync: %v", err)
	}
	src.push(step{t1: 2_000_000, err: boom}, step{t1: 3_000_000, err: boom})
	err := c.Sync(t.Context())
	if !errors.Is(err, boom) {
		t.Fatalf("sync error = %v, want it to wrap %v", err, boom)
	}
	if got := c.Offset(); got != 5*time.Millisecond {
		t.Errorf("offset after failure = %s, want the old 5ms", got)
	}
	if !c.Synced() {
		t.Error("a failure must not unset Synced")
	}
	if got := c.Now(); got != 3_000_000+5_000_000 {
		t.Errorf("Now = %d, want local 3000000 + old offset 5000000", got)
	}
	if got := testutil.ToFloat64(gauge(t, reg, "weir_redis_clock_sync_errors_total")); got != 1 {
		t.Errorf("sync errors = %g, want 1", got)
	}
}

func TestClock_Sync_neverSyncedFails(t *testing.T) {
	clk := newFakeClock(1_000_000)
	src := &fakeSource{clock: clk} // every call fails
	c := mustNew(t, cfgSamples(3), src, clk, nil)
	if err := c.Sync(t.Context()); err == nil {
		t.Fatal("sync succeeded with no good sample")
	}
	if c.Synced() || c.Offset() != 0 {
		t.Errorf("synced=%v offset=%s, want false and 0", c.Synced(), c.Offset())
	}
	if got := c.Now(); got != 1_000_000 {
		t.Errorf("Now before any sync = %d, want the local 1000000", got)
	}
}

func TestClock_Now_neverBackwardsWhenOffsetShrinks(t *testing.T) {
	clk := newFakeClock(1_000_000_000)
	src := &fakeSource{clock: clk, steps: []step{
		{t1: 1_000_000_000, redis: 1_010_000_000}, // offset +10ms
		{t1: 1_002_000_000, redis: 1_001_500_000}, // offset 0 (t0 1_001_000_000): 10ms less than before
	}}
	c := mustNew(t, cfgSamples(1), src, clk, nil)
	if err := c.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	clk.Set(1_001_000_000)
	high := c.Now()
	if high != 1_011_000_000 {
		t.Fatalf("Now = %d, want 1011000000", high)
	}
	if err := c.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c.Offset() != 0 {
		t.Fatalf("offset = %s, want 0", c.Offset())
	}
	for _, local := range []int64{1_002_000_000, 1_010_999_999, 1_011_000_000} {
		clk.Set(local)
		if got := c.Now(); got != high {
			t.Errorf("local %d: Now = %d, want it held at %d", local, got, high)
		}
	}
	clk.Set(1_011_000_001)
	if got := c.Now(); got != 1_011_000_001 {
		t.Errorf("Now = %d, want 1011000001 once time caught up", got)
	}
}

func TestClock_Now_localClockBackwardsHeld(t *testing.T) {
	clk := newFakeClock(5_000_000)
	src := &fakeSource{clock: clk, steps: []step{{t1: 5_000_000, redis: 5_000_000}}}
	c := mustNew(t, cfgSamples(1), src, clk, nil)
	if err := c.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := c.Now(); got != 5_000_000 {
		t.Fatalf("Now = %d", got)
	}
	clk.Set(4_999_999)
	if got := c.Now(); got != 5_000_000 {
		t.Errorf("Now after the local clock went back 1ns = %d, want 5000000", got)
	}
}

func TestClock_Now_concurrentNeverBackwards(t *testing.T) {
	clk := newFakeClock(1_000_000_000)
	src := &fakeSource{clock: clk}
	for i := range int64(200) {
		// Offsets alternate between +1ms and -1ms while time advances 10us.
		off := int64(1_000_000)
		if i%2 == 1 {
			off = -1_000_000
		}
		t1 := 1_000_000_000 + 10_000*i
		src.push(step{t1: t1, redis: t1 + off})
	}
	c := mustNew(t, cfgSamples(1), src, clk, nil)
	if err := c.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 8 {
		wg.Go(func() {
			prev := c.Now()
			for {
				select {
				case <-stop:
					return
				default:
				}
				n := c.Now()
				if n < prev {
					select {
					case errs <- "Now went backwards":
					default:
					}
					return
				}
				prev = n
			}
		})
	}
	for range 199 {
		_ = c.Sync(t.Context())
	}
	close(stop)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestClock_Run_resamplesUntilCancelled drives Run's timer with the
// manual clock and the default config: one Sync at once, then one every
// Interval, each of Samples TIME calls.
func TestClock_Run_resamplesUntilCancelled(t *testing.T) {
	cfg := redisclock.DefaultConfig()
	interval := cfg.Interval.Nanoseconds()
	clk := newFakeClock(1_000_000)
	src := &fakeSource{clock: clk}
	for i := range int64(3) { // Redis 2ms ahead, TIME answered at once
		for range cfg.Samples {
			t1 := 1_000_000 + i*interval
			src.push(step{t1: t1, redis: t1 + 2_000_000})
		}
	}
	c := mustNew(t, cfg, src, clk, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	for syncs := 1; syncs <= 3; syncs++ {
		// Run arms its timer after each Sync: then the Sync is done.
		if err := clk.WaitForTimers(ctx, 1); err != nil {
			t.Fatal(err)
		}
		src.mu.Lock()
		calls := src.calls
		src.mu.Unlock()
		if calls != syncs*cfg.Samples {
			t.Fatalf("after %d syncs: %d TIME calls, want %d", syncs, calls, syncs*cfg.Samples)
		}
		if next := clk.Timers()[0].Sub(clk.Now()); next != cfg.Interval {
			t.Fatalf("after %d syncs: next in %s, want Interval %s", syncs, next, cfg.Interval)
		}
		if !c.Synced() || c.Offset() != 2*time.Millisecond {
			t.Fatalf("after %d syncs: synced=%v offset=%s, want true and 2ms", syncs, c.Synced(), c.Offset())
		}
		clk.Advance(cfg.Interval)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	if got := clk.Timers(); len(got) != 0 {
		t.Errorf("Run left timers pending: %v", got)
	}
}

func TestConfig_Validate(t *testing.T) {
	if err := redisclock.DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	for name, mut := range map[string]func(*redisclock.Config){
		"zero interval": func(c *redisclock.Config) { c.Interval = 0 },
		"zero timeout":  func(c *redisclock.Config) { c.Timeout = 0 },
		"zero samples":  func(c *redisclock.Config) { c.Samples = 0 },
	} {
		cfg := redisclock.DefaultConfig()
		mut(&cfg)
		if cfg.Validate() == nil {
			t.Errorf("%s: Validate accepted %+v", name, cfg)
		}
	}
}

func TestNew_badInputIsAnError(t *testing.T) {
	clk := newFakeClock(1)
	src := &fakeSource{clock: clk}
	for name, build := range map[string]func(reg prometheus.Registerer) (*redisclock.Clock, error){
		"invalid config": func(reg prometheus.Registerer) (*redisclock.Clock, error) {
			return redisclock.New(redisclock.Config{}, src, clk, nil, reg)
		},
		"nil source": func(reg prometheus.Registerer) (*redisclock.Clock, error) {
			return redisclock.New(redisclock.DefaultConfig(), nil, clk, nil, reg)
		},
	} {
		reg := prometheus.NewRegistry()
		if c, err := build(reg); err == nil || c != nil {
			t.Errorf("%s: New = %v, %v; want an error", name, c, err)
		}
		if n, _ := testutil.GatherAndCount(reg); n != 0 {
			t.Errorf("%s: a failed New registered %d metrics", name, n)
		}
	}
	reg := prometheus.NewRegistry()
	mustNew(t, redisclock.DefaultConfig(), src, clk, reg)
	if _, err := redisclock.New(redisclock.DefaultConfig(), src, clk, nil, reg); err == nil {
		t.Error("a second Clock on one registry: no error")
	}
}

// TestNew_nilLocalIsTheRealClock: before any Sync, Now is the local
// clock, which nil makes clock.Real.
func TestNew_nilLocalIsTheRealClock(t *testing.T) {
	c := mustNew(t, redisclock.DefaultConfig(), &fakeSource{clock: newFakeClock(1)}, nil, nil)
	before := time.Now().UnixNano()
	got := c.Now()
	after := time.Now().UnixNano()
	if got < before || got > after {
		t.Fatalf("Now = %d, want the real clock, in [%d, %d]", got, before, after)
	}
}

func mustNew(t *testing.T, cfg redisclock.Config, src redisclock.Source, local clock.Clock, reg prometheus.Registerer) *redisclock.Clock {
	t.Helper()
	c, err := redisclock.New(cfg, src, local, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
