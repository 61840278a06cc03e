package sim_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/region"
	"github.com/weirhq/weir/region/sim"
)

// matrixCell is one global limit of the default-settings matrix: rate G
// per second, burst B, over R regions.
type matrixCell struct {
	regions []string
	rate    float64
	burst   int64
}

func (c matrixCell) String() string {
	return fmt.Sprintf("%dregions/%g-per-s/burst%d", len(c.regions), c.rate, c.burst)
}

func (c matrixCell) global() gcra.Limit {
	return gcra.Limit{Interval: int64(float64(time.Second) / c.rate), Burst: c.burst}
}

// window is the measured span W: at least 10s plus 40 units' time, and
// long enough that a bucket drained when the window opens costs under a
// tenth of the bound: the G·W term is 20 × B.
func (c matrixCell) window() time.Duration {
	secs := max(10+40/c.rate, 20*float64(c.burst)/c.rate)
	return time.Duration(secs * float64(time.Second))
}

func matrix() []matrixCell {
	var out []matrixCell
	for _, regions := range [][]string{{"eu", "us"}, {"eu", "us", "ap"}} {
		for _, rate := range []float64{1, 10, 100, 1_000, 10_000} {
			for _, burst := range []int64{1, 2, 5, 10, 20, 100} {
				out = append(out, matrixCell{regions, rate, burst})
			}
		}
	}
	return out
}

// settle is how soon after demand changes the measured window opens, and
// by when a region alone must hold 90% of the limit: eight intervals.
const settle = 4 * time.Second

// cellTrace runs cell with region.DefaultConfig and 40ms ± 20ms delays:
// every region at half the limit in all for 10s (the homes' start-up
// quiet period, then shares that follow demand), then the regions in busy
// at twenty times the whole limit each (so that a burst of one waits
// little for its next request: a GCRA of burst 1 loses the time from its
// refill to the next arrival) and the others idle, until the measured
// window ends.
func cellTrace(c matrixCell, busy []string) sim.Trace {
	const warm = 10 * time.Second
	g, n := c.rate, float64(len(c.regions))
	return sim.Trace{
		Name: c.String(), Config: region.DefaultConfig(c.regions...), Global: c.global(),
		Duration: warm + settle + c.window(), Warmup: warm,
		Demand: func(r string, t time.Duration) float64 {
			switch {
			case t < warm:
				return g / 2 / n
			case slices.Contains(busy, r):
				return 20 * g
			}
			return 0
		},
		Delay: 40 * time.Millisecond, Jitter: 20 * time.Millisecond, Seed: uint64(c.rate) + uint64(c.burst),
	}
}

// TestRun_defaultSettingsMatrix runs every global limit of rates 1/s to
// 10,000/s and bursts 1 to 100 over two and three regions with the
// default settings. When every region asks for more than its share, all
// regions together admit at most G·W + B and at least 0.9 × (G·W + B) in
// the window W that opens 4s (eight intervals) after demand rose; when
// only one region asks, it holds ≥ 90% of the limit within those 4s and
// alone admits ≥ 0.9 × (G·W + B). No window of any run exceeds the bound,
// and Σ shares never exceeds Whole.
func TestRun_defaultSettingsMatrix(t *testing.T) {
	for _, c := range matrix() {
		t.Run(c.String(), func(t *testing.T) {
			t.Parallel()
			w := c.window()
			if (raceEnabled || testing.Short()) && w > 11*time.Second {
				// rates under 100/s and 100/s burst 100 (up to 2,000s of
				// simulated time); the race detector adds nothing to a
				// single-threaded simulation
				t.Skip("long run: skipped with -short and -race")
			}
			from := 10*time.Second + settle
			t.Run("all-busy", func(t *testing.T) {
				r := runCell(t, cellTrace(c, c.regions))
				checkCell(t, c, r, from, w)
			})
			t.Run("one-busy", func(t *testing.T) {
				home, _ := region.HomeOf(sim.Key, c.regions)
				busy := c.regions[0]
				if busy == home {
					busy = c.regions[1] // the harder case: it needs the home's grants
				}
				r := runCell(t, cellTrace(c, []string{busy}))
				i := slices.Index(c.regions, busy)
				for _, s := range r.Samples {
					if s.At >= from && s.Share[i] < 0.9 {
						t.Fatalf("%s at %s holds %.3f of the limit, want ≥ 0.9 from %s after the others went idle", busy, s.At, s.Share[i], settle)
					}
				}
				checkCell(t, c, r, from, w)
			})
		})
	}
}

func runCell(t *testing.T, tr sim.Trace) sim.Result {
	t.Helper()
	r, err := sim.Run(tr)
	if err != nil {
		t.Fatal(err)
	}
	if r.Overshoot > 0 || r.MaxInUse > region.Whole || r.MaxInFlight > region.Whole || r.MaxReserved > region.Whole {
		t.Fatalf("overshoot %.1f units; Σ shares in use %d, in flight %d, reserved %d", r.Overshoot, r.MaxInUse, r.MaxInFlight, r.MaxReserved)
	}
	return r
}

func checkCell(t *testing.T, c matrixCell, r sim.Result, from, w time.Duration) {
	t.Helper()
	bound := c.rate*w.Seconds() + float64(c.burst)
	got := float64(r.AdmittedIn(from, from+w))
	t.Logf("%s: admitted %.0f in %s, bound G·W + B = %.0f: %.3f", t.Name(), got, w, bound, got/bound)
	if got > bound || got < 0.9*bound {
		t.Errorf("admitted %.0f in %s, want within [0.9, 1] × G·W + B = %.0f (%.3f)", got, w, bound, got/bound)
	}
}
