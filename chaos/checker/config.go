package checker

import (
	"math"
	"reflect"
	"time"
)

// Config tunes Check. Start from DefaultConfig; the zero Config means
// DefaultConfig.
type Config struct {
	// Windows are the widths of the sliding windows the bound is checked
	// over. Nil means DefaultConfig's.
	Windows []time.Duration
	// Recovery is how long after a fault-end the cluster is still
	// recovering: operations invoked then are in the recovery phase, and a
	// fault's owners and crash terms apply to windows overlapping
	// [fault-start, fault-end + Recovery].
	Recovery time.Duration
	// CrashLoss is the documented crash term F + R: an owner killed with
	// SIGKILL may lose r × (F + R) units of a key. It is applied as
	// ceil(CrashLoss / T) + 1 units per key and per crash.
	CrashLoss time.Duration
	// StateSlack is the fraction of the burst a saturated key may admit
	// beyond StateWindow/T after its owner dies, in the state-survival
	// check.
	StateSlack float64
	// StateWindow is the width Ws of the window after a crash that the
	// state-survival check counts admissions in. Zero means 3s.
	StateWindow time.Duration
	// StateLookback is how far before a crash a key must have been denied
	// (without fallback) to count as saturated. Zero means 2s.
	StateLookback time.Duration
	// StateMinBurst is the smallest burst the state-survival check is
	// applied to; below it a fresh burst cannot be told from the slack.
	// Zero means 4.
	StateMinBurst int64
	// MinHealthyAvailability, MinFaultAvailability and
	// MinRecoveryAvailability are the availability floors per phase: the
	// share of operations answered (allowed or denied) within the header's
	// deadline. A floor of 0 reports the phase without judging it.
	MinHealthyAvailability  float64
	MinFaultAvailability    float64
	MinRecoveryAvailability float64
	// MaxP99 is the ceiling on the p99 latency of answered operations in
	// every phase, faults included: the claim that a caller waits no
	// longer than weir's own deadlines (forward and Redis timeouts) plus a
	// margin, whatever fails. 0 reports latency without judging it.
	MaxP99 time.Duration
	// MaxViolations caps the window violations kept per limit (each one a
	// run of overlapping violating windows); the rest are only counted.
	// Zero means 20.
	MaxViolations int
}

// DefaultConfig is the configuration the chaos suite judges runs with.
func DefaultConfig() Config {
	return Config{
		Windows:                 []time.Duration{time.Second, 5 * time.Second},
		Recovery:                5 * time.Second,
		CrashLoss:               50 * time.Millisecond,
		StateSlack:              0.5,
		StateWindow:             3 * time.Second,
		StateLookback:           2 * time.Second,
		StateMinBurst:           4,
		MinHealthyAvailability:  0.99,
		MinFaultAvailability:    0,
		MinRecoveryAvailability: 0.95,
		MaxViolations:           20,
	}
}

// withDefaults returns DefaultConfig for the zero Config, and otherwise
// fills the fields whose zero value means "the default".
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if reflect.ValueOf(c).IsZero() {
		return d
	}
	if c.Windows == nil {
		c.Windows = d.Windows
	}
	if c.StateWindow <= 0 {
		c.StateWindow = d.StateWindow
	}
	if c.StateLookback <= 0 {
		c.StateLookback = d.StateLookback
	}
	if c.StateMinBurst <= 0 {
		c.StateMinBurst = d.StateMinBurst
	}
	if c.MaxViolations <= 0 {
		c.MaxViolations = d.MaxViolations
	}
	if c.Recovery < 0 {
		c.Recovery = 0
	}
	if c.CrashLoss < 0 {
		c.CrashLoss = 0
	}
	return c
}

// crashUnits is the crash term in units of a key of a limit with emission
// interval t: ceil(loss / t) + 1.
func crashUnits(loss, t time.Duration) float64 {
	if t <= 0 {
		return 1
	}
	return math.Ceil(float64(loss)/float64(t)) + 1
}

// floor returns the availability floor of a phase.
func (c Config) floor(p Phase) float64 {
	switch p {
	case PhaseFault:
		return c.MinFaultAvailability
	case PhaseRecovery:
		return c.MinRecoveryAvailability
	}
	return c.MinHealthyAvailability
}
