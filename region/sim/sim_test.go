package sim_test

import (
	"testing"
	"time"

	"github.com/weirhq/weir/region"
	"github.com/weirhq/weir/region/sim"
)

// TestRun_standardTraces holds the standard traces to the targets of issue
// 15: efficiency ≥ 98% on steady skew and ≥ 95% on shifts, no overshoot
// anywhere, convergence within 10s, Σ shares ≤ Whole throughout.
func TestRun_standardTraces(t *testing.T) {
	minEff := map[string]float64{
		"skew-90-10": 0.98, "skew-90-10-over": 0.98, "five-skew": 0.98, "flapping": 0.98,
		"shift": 0.95, "three-shift": 0.95,
		// A cut-off region is held to its floor (2%) once its grant
		// expires, by design; the figures are in docs/regions.md. silent:
		// us (the key's home is eu) loses 280/s for about 16s of the 50s
		// measured (≈ 91%). silent-home: eu, the home, keeps its share,
		// while us and ap are cut off from it and fall to their floors
		// (≈ 85%). Both then take a few seconds to win their shares back.
		"silent": 0.88, "silent-home": 0.80,
	}
	for _, tr := range sim.Standard() {
		t.Run(tr.Name, func(t *testing.T) {
			t.Parallel()
			r, err := sim.Run(tr)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("efficiency %.4f overshoot %.1f converged %v in %s max in use %d reserved %d",
				r.Efficiency, r.Overshoot, r.Converged, r.Convergence, r.MaxInUse, r.MaxReserved)
			if r.Efficiency < minEff[tr.Name] {
				t.Errorf("efficiency %.4f, want ≥ %.2f", r.Efficiency, minEff[tr.Name])
			}
			if r.Overshoot > 0 {
				t.Errorf("overshoot %.1f units", r.Overshoot)
			}
			if r.MaxInUse > region.Whole || r.MaxInFlight > region.Whole || r.MaxReserved > region.Whole {
				t.Errorf("Σ shares in use %d, with grants in flight %d, reserved %d, above %d", r.MaxInUse, r.MaxInFlight, r.MaxReserved, region.Whole)
			}
			if tr.Shift > 0 && (!r.Converged || r.Convergence > 10*time.Second) {
				t.Errorf("converged %v in %s, want within 10s", r.Converged, r.Convergence)
			}
		})
	}
}
