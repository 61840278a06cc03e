package sim

import (
	"time"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/region"
)

// StandardGlobal is the global limit of the standard traces: 1,000 units
// per second (one per millisecond), burst 100.
var StandardGlobal = gcra.Limit{Interval: int64(time.Millisecond), Burst: 100}

// Standard returns the traces whose figures docs/regions.md reports, with
// region.DefaultConfig, 40ms ± 20ms one-way delays, 60s runs measured
// after a 10s warmup:
//
//   - skew-90-10: two regions offering 900/s and 100/s (the limit exactly);
//   - skew-90-10-over: the same skew at twice the limit;
//   - shift: 900/100 becomes 100/900 at 30s;
//   - silent: three regions (eu/us/ap at 500/300/200/s); the busiest
//     region that is not the key's home is cut off from both others from
//     20s to 40s and keeps serving its clients;
//   - silent-home: the same, but the region cut off is the key's home;
//   - flapping: two regions (700/300/s); their link drops for 1.5s of
//     every 4s from 15s to 45s, and 2% of messages are lost throughout;
//   - three-shift: three regions, 600/300/100 becomes 100/300/600 at 30s;
//   - five-skew: five regions, 500/200/150/100/50, with 1% loss.
func Standard() []Trace {
	rate := func(per map[string]float64) DemandFunc {
		return func(r string, _ time.Duration) float64 { return per[r] }
	}
	shift := func(at time.Duration, before, after map[string]float64) DemandFunc {
		return func(r string, t time.Duration) float64 {
			if t < at {
				return before[r]
			}
			return after[r]
		}
	}
	two := []string{"eu", "us"}
	three := []string{"eu", "us", "ap"}
	five := []string{"eu", "us", "ap", "sa", "af"}
	home, _ := region.HomeOf(Key, three)
	away := "eu" // the busiest region that is not the key's home
	if home == away {
		away = "us"
	}
	var flaps []Outage
	for t := 15 * time.Second; t < 45*time.Second; t += 4 * time.Second {
		flaps = append(flaps, Outage{Region: "eu", Peer: "us", From: t, To: t + 1500*time.Millisecond})
	}
	return []Trace{
		base("skew-90-10", two, rate(map[string]float64{"eu": 900, "us": 100}), 0),
		base("skew-90-10-over", two, rate(map[string]float64{"eu": 1800, "us": 200}), 0),
		base("shift", two, shift(30*time.Second,
			map[string]float64{"eu": 900, "us": 100}, map[string]float64{"eu": 100, "us": 900}), 30*time.Second),
		with(base("silent", three, rate(map[string]float64{"eu": 500, "us": 300, "ap": 200}), 0), func(t *Trace) {
			t.Outages = []Outage{{Region: away, From: 20 * time.Second, To: 40 * time.Second}}
		}),
		with(base("silent-home", three, rate(map[string]float64{"eu": 500, "us": 300, "ap": 200}), 0), func(t *Trace) {
			t.Outages = []Outage{{Region: home, From: 20 * time.Second, To: 40 * time.Second}}
		}),
		with(base("flapping", two, rate(map[string]float64{"eu": 700, "us": 300}), 0), func(t *Trace) {
			t.Outages, t.Loss = flaps, 0.02
		}),
		base("three-shift", three, shift(30*time.Second,
			map[string]float64{"eu": 600, "us": 300, "ap": 100},
			map[string]float64{"eu": 100, "us": 300, "ap": 600}), 30*time.Second),
		with(base("five-skew", five, rate(map[string]float64{"eu": 500, "us": 200, "ap": 150, "sa": 100, "af": 50}), 0),
			func(t *Trace) { t.Loss = 0.01 }),
	}
}

func base(name string, regions []string, d DemandFunc, shift time.Duration) Trace {
	return Trace{
		Name: name, Config: region.DefaultConfig(regions...), Global: StandardGlobal,
		Duration: 60 * time.Second, Warmup: 10 * time.Second, Demand: d,
		Delay: 40 * time.Millisecond, Jitter: 20 * time.Millisecond, Shift: shift, Seed: 1,
	}
}

func with(t Trace, f func(*Trace)) Trace {
	f(&t)
	return t
}
