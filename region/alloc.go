package region

import "math"

// Targets returns each region's target share of one key from the regions'
// demands (fractions of the global rate; a silent region's is 0): its floor
// plus a part of the spare (Whole minus all floors).
//
// When the demands above the floors exceed the spare, the spare is split
// in proportion to them. Otherwise every region gets its demand, and what
// is left is split in proportion to demand (evenly if there is none), so a
// busy region has room to grow before its next report. The targets sum to
// at most Whole. Demands must be finite and >= 0, and len(demand) × floor
// at most Whole (Config.Validate and Home.Handle see to both).
func Targets(demand []float64, floor Share) []Share {
	n := len(demand)
	out := make([]Share, n)
	f := floor.Fraction()
	spare := 1 - float64(n)*f
	above := make([]float64, n)
	var sumAbove, sumDemand float64
	for i, d := range demand {
		above[i] = max(0, d-f)
		sumAbove += above[i]
		sumDemand += d
	}
	for i := range out {
		var part float64
		switch {
		case sumAbove >= spare:
			part = spare * above[i] / sumAbove
		case sumDemand > 0:
			part = above[i] + (spare-sumAbove)*demand[i]/sumDemand
		default:
			part = spare / float64(n)
		}
		out[i] = floor + Share(math.Floor(max(0, part)*float64(Whole)))
	}
	return out
}

// damp moves cur towards target by the fraction d of the gap, and all the
// way once the gap is under a thousandth of the limit.
func damp(cur, target Share, d float64) Share {
	gap := target - cur
	if gap > -Whole/1000 && gap < Whole/1000 {
		return target
	}
	return cur + Share(math.Round(float64(gap)*d))
}
