package sim_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/region"
	"github.com/weirhq/weir/region/sim"
)

// randomTrace builds a random run: 2 to 5 regions, demand that jumps at
// random moments, random delays, loss, outages (links and whole regions),
// clocks drifting up to 0.1% with a Grace that covers it, and random
// rebalancing settings.
func randomTrace(seed uint64) sim.Trace {
	rng := rand.New(rand.NewPCG(seed, 42))
	names := []string{"eu", "us", "ap", "sa", "af"}[:2+rng.IntN(4)]
	cfg := region.DefaultConfig(names...)
	cfg.Floor = region.Share(rng.Int64N(int64(region.Whole) / int64(len(names)) / 4))
	cfg.Interval = time.Duration(100+rng.IntN(900)) * time.Millisecond
	cfg.TTL = cfg.Interval * time.Duration(2+rng.IntN(6))
	cfg.Damping = 0.1 + 0.9*rng.Float64()
	drift := map[string]float64{}
	var rho float64
	for _, n := range names {
		drift[n] = (rng.Float64()*2 - 1) * 1e-3
		rho = max(rho, math.Abs(drift[n]))
	}
	// Two clocks may differ by up to 2ρ in rate.
	cfg.Grace = time.Duration(math.Ceil(2*2*rho/(1-2*rho)*float64(cfg.TTL))) + time.Microsecond

	dur := 20 * time.Second
	// Rates from 5/s to 5,000/s, bursts up to 300: a burst may take from
	// milliseconds to a minute to refill, longer than a share takes to move.
	// Intervals (nanoseconds) from 200µs to 200ms, most not whole
	// microseconds.
	global := gcra.Limit{Interval: int64(float64(200*time.Microsecond) * math.Exp(rng.Float64()*math.Log(1000))), Burst: int64(1 + rng.IntN(300))}
	g := float64(time.Second) / float64(global.Interval)
	type step struct {
		at   time.Duration
		rate map[string]float64
	}
	var steps []step
	for at := time.Duration(0); at < dur; {
		r := map[string]float64{}
		for _, n := range names {
			if rng.IntN(4) > 0 {
				r[n] = g * 1.5 * rng.Float64()
			}
		}
		steps = append(steps, step{at, r})
		if rng.IntN(3) == 0 { // a spike: one region offers far more for a moment
			at += time.Duration(500+rng.IntN(3000)) * time.Millisecond
			spike := map[string]float64{names[rng.IntN(len(names))]: g * float64(5+rng.IntN(50))}
			steps = append(steps, step{at, spike})
			at += time.Duration(5+rng.IntN(50)) * time.Millisecond
			continue
		}
		at += time.Duration(500+rng.IntN(5000)) * time.Millisecond
	}
	demand := func(r string, t time.Duration) float64 {
		i := 0
		for i+1 < len(steps) && steps[i+1].at <= t {
			i++
		}
		return steps[i].rate[r]
	}
	var outages []sim.Outage
	for range rng.IntN(5) {
		from := time.Duration(rng.Int64N(int64(dur)))
		o := sim.Outage{Region: names[rng.IntN(len(names))], From: from, To: from + time.Duration(rng.Int64N(int64(8*time.Second)))}
		if rng.IntN(2) == 0 {
			o.Peer = names[rng.IntN(len(names))]
		}
		outages = append(outages, o)
	}
	return sim.Trace{
		Name: "random", Config: cfg, Global: global,
		Duration: dur, Demand: demand,
		Delay: time.Duration(rng.IntN(300)) * time.Millisecond, Jitter: time.Duration(rng.IntN(400)) * time.Millisecond,
		Loss: 0.3 * rng.Float64(), Outages: outages, Drift: drift, Seed: seed,
	}
}

// TestRun_randomTracesKeepTheInvariant checks, over random traces, that at
// every step (1ms) the shares the regions enforce sum to at most Whole,
// also counting every grant in flight as taken up, that no home ever
// reserves more than Whole, and that the units admitted by all regions
// together never exceed G·W·(1+drift) + B in any window.
func TestRun_randomTracesKeepTheInvariant(t *testing.T) {
	n := 30
	if testing.Short() || raceEnabled {
		n = 6
	}
	for seed := range uint64(n) {
		tr := randomTrace(seed)
		r, err := sim.Run(tr)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if r.MaxInUse > region.Whole || r.MaxInFlight > region.Whole || r.MaxReserved > region.Whole {
			t.Errorf("seed %d: Σ in use %d, with in flight %d, reserved %d, above %d",
				seed, r.MaxInUse, r.MaxInFlight, r.MaxReserved, region.Whole)
		}
		if r.Overshoot > 0 {
			t.Errorf("seed %d: overshoot %.2f units (limit %+v, config %+v)", seed, r.Overshoot, tr.Global, tr.Config)
		}
	}
}
