package region

import (
	"cmp"
	"math/big"
	"slices"

	"github.com/weirhq/weir/gcra"
)

// Limit returns the GCRA limit a region enforces with share s of the
// global limit g under c: the share's part of the rate (the interval
// rounded up) and a burst in whole units by the unit rule below, so that
// the limits of the regions' shares, each at least c.Floor and together
// at most Whole, admit together at most g's rate and g's burst. ok is false
// when the share admits nothing: s not positive, above Whole or below the
// floor, or a burst of zero units. g must be a valid limit.
//
// The unit rule (docs/regions.md, "Small bursts"). With R regions, floor
// F, spare S = Whole − R·F and a global burst B, every region's floor holds
// f = ⌊F·B⌋ units, or 1 if that is 0 and B ≥ R, else 0 (so R·f ≤ B); the
// U = B − R·f other units go with the share above the floor, a = s − F:
// the burst is
//
//	f + k,  k = the largest integer below a·(U+1)/S
//
// Since Σ a ≤ S, Σ k < U+1, so Σ k ≤ U and Σ bursts ≤ R·f + U = B. A
// region at its floor admits whenever B ≥ R; when B < R at most B regions
// can hold a unit at once, and the home gives the units to the busiest
// (see Home.SetBursts).
func (c Config) Limit(s Share, g gcra.Limit) (lim gcra.Limit, ok bool) {
	if s <= 0 || s > Whole || s < c.Floor {
		return gcra.Limit{}, false
	}
	burst := c.floorUnits(g.Burst) + c.unitsAbove(s-c.Floor, g.Burst)
	if burst < 1 {
		return gcra.Limit{}, false
	}
	lim = gcra.Limit{Interval: mulDiv(g.Interval, int64(Whole), int64(s), true), Burst: burst}
	if lim.Validate() != nil {
		return gcra.Limit{}, false
	}
	return lim, true
}

// floorUnits is the units of a global burst each region's floor holds:
// ⌊Floor·B⌋, or one when that rounds down to none but every region can
// have one (B ≥ R), else none.
func (c Config) floorUnits(burst int64) int64 {
	if f := mulDiv(burst, int64(c.Floor), int64(Whole), false); f >= 1 {
		return f
	}
	if burst >= int64(len(c.Regions)) {
		return 1
	}
	return 0
}

// spare is Whole less every region's floor.
func (c Config) spare() Share { return Whole - Share(len(c.Regions))*c.Floor }

// unitsAbove is k of the unit rule: the units that a share a above the
// floor holds of a global burst.
func (c Config) unitsAbove(a Share, burst int64) int64 {
	spare := c.spare()
	if a <= 0 || spare <= 0 {
		return 0
	}
	u := burst - int64(len(c.Regions))*c.floorUnits(burst)
	p := new(big.Int).Mul(big.NewInt(int64(a)), big.NewInt(u+1))
	p.Sub(p, big.NewInt(1))
	p.Quo(p, big.NewInt(int64(spare)))
	return min(p.Int64(), u)
}

// unitStep is the least share above the floor that holds a unit of a
// global burst whose floors hold none: ⌈(S+1)/(B+1)⌉.
func (c Config) unitStep(burst int64) Share {
	return Share((int64(c.spare()) + burst) / (burst + 1))
}

// Admits reports whether the global limit g can admit anything under c,
// and whether every region's floor admits (a region cut off from the
// key's home, or during a home's start-up, then still admits at its
// floor). strict says the limit is a strict one, enforced at a fixed
// Whole/R in every region.
func (c Config) Admits(g gcra.Limit, strict bool) (some, floors bool) {
	if strict {
		_, ok := c.Limit(Whole/Share(len(c.Regions)), g)
		return ok, ok
	}
	_, floors = c.Limit(c.Floor, g)
	_, some = c.Limit(c.Floor+c.spare(), g)
	return some || floors, floors
}

// quantize adjusts the targets of a key whose floors hold no unit of its
// global burst (B < R): a share between the floor and floor + unitStep
// admits nothing, so the spare goes to at most B regions with demand, the
// busiest first (a region that holds a unit now counts double, so that
// two equal demands do not swap the units every round), each at least a
// unit's step above its floor and the rest in proportion to demand; the
// others get their floors.
func (c Config) quantize(targets []Share, demand []float64, holds []bool, burst int64) []Share {
	step := c.unitStep(burst)
	if c.floorUnits(burst) > 0 || step <= 0 || step > c.spare() {
		return targets
	}
	idx := make([]int, 0, len(demand))
	for i, d := range demand {
		if d > 0 {
			idx = append(idx, i)
		}
	}
	weight := func(i int) float64 {
		if holds[i] {
			return 2 * demand[i]
		}
		return demand[i]
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(weight(b), weight(a)) })
	n := min(int64(len(idx)), burst, int64(c.spare()/step))
	idx = idx[:n]
	out := make([]Share, len(targets))
	for i := range out {
		out[i] = c.Floor
	}
	var sum float64
	for _, i := range idx {
		sum += demand[i]
	}
	rest := float64(c.spare() - Share(n)*step)
	for _, i := range idx {
		out[i] = c.Floor + step + Share(rest*demand[i]/sum)
	}
	return out
}
