package sim

import (
	"time"

	"github.com/weirhq/weir/region"
)

// Result is one run's figures.
type Result struct {
	Name string
	// Efficiency is the units admitted after the warmup over the units
	// that could have been: Σ min(total demand, global rate) over the same
	// span. 1 is perfect; cut-off regions and lagging shares lower it.
	Efficiency float64
	// Admitted and Wanted are its numerator and denominator, in units.
	Admitted, Wanted float64
	// Overshoot is the largest number of units admitted by all regions
	// together in any window of W (1ms to 10s, over the whole run) above
	// the global bound G·W·(1+drift) + B. 0 means the bound held.
	Overshoot float64
	// Converged says whether, after Trace.Shift, the enforced shares
	// reached 95% of the allocation the new demand calls for
	// (Σ min(share, target) ≥ 0.95·Σ target), and Convergence how long
	// after the shift they first did.
	Converged   bool
	Convergence time.Duration
	// MaxInUse is the largest Σ of the shares the regions enforced at one
	// instant; MaxInFlight the largest Σ over regions of the larger of
	// the share enforced and any grant in flight to the region that it
	// would take up on arrival; MaxReserved the largest Σ a home reserved.
	// None may exceed region.Whole.
	MaxInUse, MaxInFlight, MaxReserved region.Share
	// Samples are the shares and demands every 100ms, for plots.
	Samples []Sample
	prefix  []int64 // units admitted by all regions in steps [0, k)
}

// AdmittedIn returns the units all regions admitted together from from
// (inclusive) to to (exclusive), at the simulator's 1ms resolution.
func (r Result) AdmittedIn(from, to time.Duration) int64 {
	i := min(max(0, int(from.Nanoseconds()/step)), len(r.prefix)-1)
	j := min(max(i, int(to.Nanoseconds()/step)), len(r.prefix)-1)
	return r.prefix[j] - r.prefix[i]
}

// Sample is the state of every region (in Trace.Config.Regions order) at
// one moment: the share it enforced and its demand, both as fractions of
// the global limit.
type Sample struct {
	At            time.Duration
	Share, Demand []float64
}

// overshootWindows are the window lengths the bound is checked over.
var overshootWindows = []time.Duration{
	time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second,
}

// series accumulates a run's figures step by step.
type series struct {
	tr       Trace
	grate    float64
	prefix   []int64 // prefix[k] = units admitted in steps [0, k)
	admitted float64
	wanted   float64
	target   []region.Share // the post-shift allocation, if any
	samples  []Sample
	conv     time.Duration
	conved   bool
}

func (s *series) init(tr Trace, grate float64) {
	s.tr, s.grate = tr, grate
	s.prefix = append(make([]int64, 0, tr.Duration.Milliseconds()+1), 0)
	if tr.Shift > 0 {
		d := make([]float64, len(tr.Config.Regions))
		for i, r := range tr.Config.Regions {
			d[i] = tr.Demand(r, tr.Shift) / grate
		}
		s.target = region.Targets(d, tr.Config.Floor)
	}
}

func (s *series) add(t, admitted int64, offered []float64, shares []region.Share) {
	s.prefix = append(s.prefix, s.prefix[len(s.prefix)-1]+admitted)
	at := time.Duration(t)
	if at >= s.tr.Warmup {
		var total float64
		for _, o := range offered {
			total += o
		}
		s.admitted += float64(admitted)
		s.wanted += min(total, s.grate) * float64(step) / perSecond
	}
	if s.target != nil && at >= s.tr.Shift && !s.conved {
		var got, want region.Share
		for i, tg := range s.target {
			got += min(shares[i], tg)
			want += tg
		}
		if float64(got) >= 0.95*float64(want) {
			s.conved, s.conv = true, at-s.tr.Shift
		}
	}
	if t%sampleEvery.Nanoseconds() == 0 {
		sm := Sample{At: at, Share: make([]float64, len(shares)), Demand: make([]float64, len(shares))}
		for i := range shares {
			sm.Share[i] = shares[i].Fraction()
			sm.Demand[i] = offered[i] / s.grate
		}
		s.samples = append(s.samples, sm)
	}
}

// overshoot is the largest excess of any window over the global bound.
func (s *series) overshoot() float64 {
	var worst float64
	burst := float64(s.tr.Global.Burst)
	for _, w := range overshootWindows {
		k := int(w.Nanoseconds() / step)
		bound := s.grate*w.Seconds()*(1+s.tr.maxDrift()) + burst
		for end := k; end < len(s.prefix); end++ {
			worst = max(worst, float64(s.prefix[end]-s.prefix[end-k])-bound)
		}
	}
	return worst
}

func (w *world) finish() {
	s := &w.series
	r := &w.result
	r.Admitted, r.Wanted = s.admitted, s.wanted
	if s.wanted > 0 {
		r.Efficiency = s.admitted / s.wanted
	}
	r.Overshoot = s.overshoot()
	r.Converged, r.Convergence = s.conved, s.conv
	r.Samples = s.samples
	r.prefix = s.prefix
}
