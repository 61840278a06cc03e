package redisclock_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/weirhq/weir/redisclock"
)

// steps reads weir_redis_clock_steps_total for one direction.
func steps(t *testing.T, reg *prometheus.Registry, dir string) float64 {
	t.Helper()
	n, err := testutil.GatherAndCount(reg, "weir_redis_clock_steps_total")
	if err != nil || n != 2 {
		t.Fatalf("steps series: %d, %v; want forward and backward", n, err)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "weir_redis_clock_steps_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == dir {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s series", dir)
	return 0
}

// TestClock_Sync_timeBaseStepDetected is a failover to a replica whose
// clock differs: the pinned server changes and TIME jumps. A jump beyond
// the threshold is counted by direction; a backward one leaves Now held
// (no key credited), a forward one is adopted; drift and sample noise
// below the threshold are not steps.
func TestClock_Sync_timeBaseStepDetected(t *testing.T) {
	const ms = int64(1_000_000)
	clk := newFakeClock(1_000 * ms)
	src := &fakeSource{clock: clk}
	reg := prometheus.NewRegistry()
	c := mustNew(t, cfgSamples(1), src, clk, reg)
	sync := func(t0, rtt, offset int64) {
		t.Helper()
		clk.Set(t0)
		src.push(step{t1: t0 + rtt, redis: t0 + rtt/2 + offset})
		if err := c.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	sync(1_000*ms, 0, 0)
	sync(2_000*ms, 2*ms, 4*ms) // 4ms: below 5ms + the samples' 1ms error
	if f, b := steps(t, reg, "forward"), steps(t, reg, "backward"); f != 0 || b != 0 {
		t.Fatalf("drift counted as a step: forward %g backward %g", f, b)
	}
	clk.Set(3_000 * ms)
	held := c.Now()           // 3004ms on the old base
	sync(3_000*ms, 0, -26*ms) // the new master's clock is 30ms behind
	if got := steps(t, reg, "backward"); got != 1 {
		t.Fatalf("backward steps = %g, want 1", got)
	}
	// Now does not go back: it holds at its high-water mark until the new
	// base passes it.
	if now := c.Now(); now != held {
		t.Fatalf("Now after a backward step = %d, want held at %d", now, held)
	}
	sync(4_000*ms, 0, 74*ms) // and one 100ms ahead
	if got := steps(t, reg, "forward"); got != 1 {
		t.Fatalf("forward steps = %g, want 1", got)
	}
	if got, want := c.Now(), 4_000*ms+74*ms; got != want {
		t.Fatalf("Now after a forward step = %d, want %d (the new base, adopted)", got, want)
	}
	if got := testutil.ToFloat64(gauge(t, reg, "weir_redis_clock_last_step_seconds")); got != 0.1 {
		t.Errorf("last step = %gs, want 0.1", got)
	}
}

func TestConfig_Validate_stepThreshold(t *testing.T) {
	cfg := redisclock.DefaultConfig()
	cfg.StepThreshold = 0
	if err := cfg.Validate(); err == nil {
		t.Fatal("zero step threshold accepted")
	}
}
