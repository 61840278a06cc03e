package checker

import (
	"fmt"
	"time"

	"github.com/weirhq/weir/chaos/history"
)

// Window is one window of one key of a limit.
type Window struct {
	Key   string
	Start int64 // Unix nanoseconds
	Width time.Duration
	// Admitted and Fallback are the units admitted by operations lying
	// entirely inside the window, normally and by a failure policy.
	Admitted, Fallback int64
	// Bound is the plain bound B + W/T.
	Bound float64
	// Allowance is the normal term: Bound × Owners plus Crashes crash
	// terms. For an open or closed limit the normal admissions are held to
	// it.
	Allowance float64
	Owners    int
	Crashes   int
	// FallbackTerms are the local fallback's terms, one per node that
	// admitted by fallback in the window, and FallbackAllowance their sum.
	// For a local limit (default or written) the normal and fallback
	// admissions together are held to Allowance + FallbackAllowance. When
	// FallbackUnbounded (on_failure: open) fallback admissions are only
	// reported.
	FallbackTerms     []FallbackTerm
	FallbackAllowance float64
	FallbackUnbounded bool
	// Excess is Admitted + Fallback − Bound; negative when there was room.
	Excess float64
	Pass   bool
}

// Violation kinds.
const (
	// KindAdmitted: normal admissions beyond the allowance.
	KindAdmitted = "admitted"
	// KindFallback: normal and local-fallback admissions together beyond
	// the normal term plus the fallback terms of the nodes that fell back.
	KindFallback = "fallback"
	// KindClosed: a closed limit admitted under its failure policy.
	KindClosed = "closed"
	// KindState: a saturated key got a fresh burst after a crash or a freeze.
	KindState = "state"
)

// Violation is a run of overlapping windows of one key over its allowance,
// described by its worst window.
type Violation struct {
	Kind       string
	Limit, Key string
	Start      int64 // Unix nanoseconds
	Width      time.Duration
	Admitted   int64
	Allowance  float64
	Bound      float64
	// Windows is how many overlapping violating windows the run spans
	// (for KindClosed, how many operations).
	Windows int
	// For KindFallback: the fallback units in Admitted, the normal term
	// (also in Allowance) and the fallback terms.
	Fallback      int64
	NormalAllow   float64
	FallbackTerms []FallbackTerm
}

// Describe renders v with times in seconds since start.
func (v Violation) Describe(start int64) string {
	at := fmt.Sprintf("window [%.3fs, +%s]", secondsSince(v.Start, start), v.Width)
	var s string
	switch v.Kind {
	case KindFallback:
		s = fmt.Sprintf("limit %q key %q: %d units admitted (%d normally, %d by fallback) in %s, allowance %s = normal %s + fallback [%s] (bound %s)",
			v.Limit, v.Key, v.Admitted, v.Admitted-v.Fallback, v.Fallback, at, Units(v.Allowance), Units(v.NormalAllow),
			describeTerms(v.FallbackTerms), Units(v.Bound))
	case KindClosed:
		s = fmt.Sprintf("limit %q key %q: %d units admitted by a closed failure policy in %s, allowance 0",
			v.Limit, v.Key, v.Admitted, at)
	case KindState:
		s = fmt.Sprintf("limit %q key %q: state lost: %d units admitted in %s after the fault, allowance %s (bound %s)",
			v.Limit, v.Key, v.Admitted, at, Units(v.Allowance), Units(v.Bound))
	default:
		s = fmt.Sprintf("limit %q key %q: %d units admitted in %s, allowance %s (bound %s)",
			v.Limit, v.Key, v.Admitted, at, Units(v.Allowance), Units(v.Bound))
	}
	switch {
	case v.Kind == KindClosed && v.Windows > 1:
		s += fmt.Sprintf(" [%d operations]", v.Windows)
	case v.Kind != KindClosed && v.Windows > 1:
		s += fmt.Sprintf(" [worst of %d overlapping windows]", v.Windows)
	}
	return s
}

// FallbackStats counts decisions made by one failure-policy mode.
type FallbackStats struct {
	Decisions int   // allowed or denied
	Allowed   int   // of them, allowed
	Units     int64 // admitted units
}

// LimitResult is the window-bound check of one limit.
type LimitResult struct {
	Spec history.LimitSpec
	Keys int // keys with at least one operation
	// AdmittedOps and Admitted count allowed operations and their units,
	// fallback included.
	AdmittedOps int
	Admitted    int64
	// FallbackAdmitted is the admitted units per fallback mode.
	FallbackAdmitted map[string]int64
	// FallbackDecisions and FallbackReasons count the answered operations
	// a failure policy decided, per mode and per reason.
	FallbackDecisions map[string]int
	FallbackReasons   map[string]int
	// TopKey is the key with the most admitted units.
	TopKey         string
	TopKeyAdmitted int64
	// Worst is the window with the largest excess over all keys and
	// widths; WorstByWidth the worst per configured width. Worst.Key is
	// empty when nothing was admitted.
	Worst        Window
	WorstByWidth []Window
	// ViolatingWindows counts every window over its allowance; Violations
	// keeps the first Config.MaxViolations runs of them, Dropped counts
	// the runs left out.
	ViolatingWindows int
	ClosedAdmits     int // operations admitted by a closed failure policy
	Violations       []Violation
	Dropped          int
	// Gap is the limit's longest stretch without a normal answer for a
	// key that was asked (Gap.Key is empty when there was none).
	Gap Gap
	// Permits is the permit check of a concurrency limit (nil for a rate
	// limit, whose windows the fields above describe).
	Permits *PermitResult
	Pass    bool
}

// StateCheck is one state-survival check: a key saturated just before a
// crash edge, and what it admitted in the StateWindow after it.
type StateCheck struct {
	Limit, Key string
	FaultID    int
	Fault      string
	Edge       string // "start" (owner killed) or "end" (restarted empty)
	At         int64  // Unix nanoseconds
	Width      time.Duration
	Admitted   int64
	Allowed    float64
	Pass       bool
}

// StateResult is the state-survival check.
type StateResult struct {
	Checks []StateCheck
	Failed int
	// Skipped names the limits the check could not judge, and why.
	Skipped []string
}

// Result is the verdict on one history.
type Result struct {
	Scenario string
	// Start is the header's Start (the earliest time recorded if unset),
	// End the latest time recorded.
	Start, End int64
	Ops        int
	Nodes      int
	Config     Config
	Faults     []Fault
	Limits     []LimitResult
	// Phases has one entry per phase, in the order of Phases.
	Phases []PhaseStats
	// Fallback counts operations per fallback mode (each operation once,
	// whatever limits it matched).
	Fallback map[string]FallbackStats
	State    StateResult
	// Leases has one entry per leasable limit: what leasing did, reported
	// beside the verdict, never part of it.
	Leases []LeaseResult
	// Gap is the longest stretch, over every limit and key, in which a key
	// that was asked got no normal (non-fallback) answer within the
	// deadline.
	Gap Gap
	// Errors are sanity failures: impossible times, unknown limits.
	Errors []string
	// Notes are remarks that do not affect the verdict.
	Notes []string
	// Violations lists every finding that fails the verdict, readable.
	Violations []string
}

// OK reports whether the history passed every check.
func (r Result) OK() bool {
	if len(r.Errors) > 0 || len(r.Violations) > 0 || r.State.Failed > 0 {
		return false
	}
	for _, l := range r.Limits {
		if !l.Pass {
			return false
		}
	}
	for _, p := range r.Phases {
		if !p.Pass {
			return false
		}
	}
	return true
}

// Phase returns the stats of phase p.
func (r Result) Phase(p Phase) PhaseStats {
	for _, s := range r.Phases {
		if s.Phase == p {
			return s
		}
	}
	return PhaseStats{Phase: p, Availability: 1, Pass: true}
}

// PhaseAt returns the phase of an operation invoked at t.
func (r Result) PhaseAt(t int64) Phase { return phaseAt(r.Faults, r.Config.Recovery, t) }

// Worst returns the limit whose worst window has the largest excess, and
// false when nothing was admitted.
func (r Result) Worst() (LimitResult, bool) {
	best, ok := LimitResult{}, false
	for _, l := range r.Limits {
		if l.Worst.Key == "" {
			continue
		}
		if !ok || l.Worst.Excess > best.Worst.Excess {
			best, ok = l, true
		}
	}
	return best, ok
}
