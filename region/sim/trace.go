package sim

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/region"
)

// ErrInvalidTrace is returned by Run for a trace that fails Validate.
var ErrInvalidTrace = errors.New("sim: invalid trace")

// DemandFunc is a region's offered load at t (since the start of the run)
// in units per second, finite and >= 0.
type DemandFunc func(region string, t time.Duration) float64

// Outage takes links down from From to To: every message sent or
// delivered in that span on a link it covers is lost. A link between
// Region and Peer, or every link of Region when Peer is "".
type Outage struct {
	Region, Peer string
	From, To     time.Duration
}

func (o Outage) covers(a, b string, t time.Duration) bool {
	if t < o.From || t >= o.To {
		return false
	}
	if o.Peer == "" {
		return a == o.Region || b == o.Region
	}
	return (a == o.Region && b == o.Peer) || (a == o.Peer && b == o.Region)
}

// Trace is one simulated run: regions sharing one global key, their
// demand, the network between them, and their clocks.
type Trace struct {
	Name string
	// Config is the rebalancing configuration every region runs.
	Config region.Config
	// Global is the key's global limit (its Interval in nanoseconds, as in
	// package gcra).
	Global gcra.Limit
	// Duration is the whole run; figures are taken after Warmup.
	Duration, Warmup time.Duration
	Demand           DemandFunc
	// Delay is every message's one-way delay between two regions, plus a
	// uniform random Jitter; Loss the chance a message is lost. Messages
	// within a region are instant and never lost.
	Delay, Jitter time.Duration
	Loss          float64
	Outages       []Outage
	// Drift is each region's clock rate error (0.001 runs 0.1% fast);
	// missing regions run true. Every region's clock also starts at a
	// different offset.
	Drift map[string]float64
	// Shift, when positive, is the moment demand shifts: Result.Convergence
	// is measured from it.
	Shift time.Duration
	// Seed makes the run's randomness (jitter, loss) reproducible.
	Seed uint64
}

// Validate reports whether t can be run. It changes nothing.
func (t Trace) Validate() error {
	if err := t.Config.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidTrace, err)
	}
	if err := t.Global.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidTrace, err)
	}
	switch {
	case t.Demand == nil:
		return fmt.Errorf("%w: no demand", ErrInvalidTrace)
	case t.Duration < time.Second || t.Warmup < 0 || t.Warmup >= t.Duration:
		return fmt.Errorf("%w: duration %s, warmup %s", ErrInvalidTrace, t.Duration, t.Warmup)
	case t.Delay < 0 || t.Jitter < 0:
		return fmt.Errorf("%w: negative delay or jitter", ErrInvalidTrace)
	case !(t.Loss >= 0 && t.Loss < 1):
		return fmt.Errorf("%w: loss %v must be in [0, 1)", ErrInvalidTrace, t.Loss)
	case t.Shift < 0 || t.Shift >= t.Duration:
		return fmt.Errorf("%w: shift %s", ErrInvalidTrace, t.Shift)
	}
	for r, d := range t.Drift {
		if math.IsNaN(d) || math.Abs(d) >= 0.01 {
			return fmt.Errorf("%w: drift %v of %q must be under 1%%", ErrInvalidTrace, d, r)
		}
	}
	return nil
}

// maxDrift is the largest clock rate error of the trace.
func (t Trace) maxDrift() float64 {
	var m float64
	for _, d := range t.Drift {
		m = max(m, math.Abs(d))
	}
	return m
}
