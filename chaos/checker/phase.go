package checker

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/weirhq/weir/chaos/history"
)

// Phase is where in a run an operation was invoked.
type Phase string

const (
	// PhaseHealthy: no fault, and no fault healed within Config.Recovery.
	PhaseHealthy Phase = "healthy"
	// PhaseFault: inside [fault-start, fault-end] of some fault.
	PhaseFault Phase = "fault"
	// PhaseRecovery: within Config.Recovery after a fault-end, outside
	// every fault.
	PhaseRecovery Phase = "recovery"
)

// Phases lists the phases in the order results report them.
var Phases = []Phase{PhaseHealthy, PhaseFault, PhaseRecovery}

// Fault is one fault of a run: a fault-start paired with the fault-end of
// the same ID.
type Fault struct {
	ID    int
	Name  string
	Nodes []string
	// Owners is how many nodes may decide one fast key at once while the
	// fault and its recovery last (at least 1).
	Owners int
	// Crash: the fault kills an owner and loses its memory.
	Crash bool
	// Stale: the touched nodes come back with memory that may be out of
	// date.
	Stale bool
	// Starved: calls sent to the touched nodes while the fault lasts are
	// reported apart from availability (history.Event.Starved).
	Starved bool
	// Start and End are Unix nanoseconds. A fault never healed ends with
	// the history (Ended is false).
	Start, End int64
	Ended      bool
}

// overlaps reports whether [s, e] meets [f.Start, f.End + recovery].
func (f Fault) overlaps(s, e int64, recovery time.Duration) bool {
	return s <= f.End+int64(recovery) && e >= f.Start
}

// pairFaults pairs each fault-start with the first later fault-end of the
// same ID. end is the end of the history, for faults never healed.
func pairFaults(events []history.Event, end int64) (faults []Fault, notes []string) {
	evs := append([]history.Event(nil), events...)
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].Time < evs[j].Time })
	open := map[int][]int{}
	for _, e := range evs {
		switch e.Kind {
		case history.FaultStart:
			owners := max(e.Owners, 1)
			open[e.ID] = append(open[e.ID], len(faults))
			faults = append(faults, Fault{ID: e.ID, Name: e.Fault, Nodes: e.Nodes,
				Owners: owners, Crash: e.Crash, Stale: e.Stale, Starved: e.Starved, Start: e.Time})
		case history.FaultEnd:
			q := open[e.ID]
			if len(q) == 0 {
				notes = append(notes, fmt.Sprintf("fault-end id %d (%s) has no fault-start; ignored", e.ID, e.Fault))
				continue
			}
			faults[q[0]].End, faults[q[0]].Ended = e.Time, true
			open[e.ID] = q[1:]
		}
	}
	for i := range faults {
		if !faults[i].Ended {
			faults[i].End = max(end, faults[i].Start)
			notes = append(notes, fmt.Sprintf("fault %q (id %d) never ended; it lasts to the end of the history",
				faults[i].Name, faults[i].ID))
		}
	}
	return faults, notes
}

// departures is when each node was out of the cluster on purpose.
type departures map[string][][2]int64

func newDepartures(events []history.Event, end int64) departures {
	d := departures{}
	for _, e := range events {
		if len(e.Nodes) != 1 {
			continue
		}
		n := e.Nodes[0]
		switch e.Kind {
		case history.NodeLeft:
			d[n] = append(d[n], [2]int64{e.Time, end})
		case history.NodeJoined:
			if iv := d[n]; len(iv) > 0 && iv[len(iv)-1][1] == end {
				iv[len(iv)-1][1] = e.Time
			}
		}
	}
	return d
}

// gone reports whether node had left at t.
func (d departures) gone(node string, t int64) bool {
	for _, iv := range d[node] {
		if t >= iv[0] && t <= iv[1] {
			return true
		}
	}
	return false
}

// starved reports whether node was starved of CPU by a Starved fault at t.
func starved(faults []Fault, node string, t int64) bool {
	for _, f := range faults {
		if f.Starved && t >= f.Start && t <= f.End && slices.Contains(f.Nodes, node) {
			return true
		}
	}
	return false
}

// phaseAt returns the phase of an operation invoked at t.
func phaseAt(faults []Fault, recovery time.Duration, t int64) Phase {
	p := PhaseHealthy
	for _, f := range faults {
		if t >= f.Start && t <= f.End {
			return PhaseFault
		}
		if f.Ended && t > f.End && t <= f.End+int64(recovery) {
			p = PhaseRecovery
		}
	}
	return p
}

// PhaseStats is availability and latency of the operations invoked in one
// phase.
type PhaseStats struct {
	Phase Phase
	// Ops counts every operation with valid times invoked in the phase.
	Ops                               int
	Allowed, Denied, Errors, Timeouts int
	// Answered counts the allowed and denied operations that completed
	// within the header's deadline; Late those that completed after it.
	Answered, Late int
	// Drained counts the operations sent to a node that had left the
	// cluster on purpose (history.NodeLeft): not in Ops, not judged.
	Drained int
	// Starved counts the operations sent to a node a Starved fault left
	// without CPU, while it lasted: not in Ops, not judged; StarvedAnswered
	// of them were answered within the deadline.
	Starved, StarvedAnswered int
	// Availability is Answered / Ops (1 when Ops is 0).
	Availability float64
	// P50, P99 and Max are latencies of the allowed and denied operations
	// (late ones included).
	P50, P99, Max time.Duration
	// Floor is the availability required; 0 means not judged.
	Floor float64
	// MaxP99 is the p99 latency allowed; 0 means not judged.
	MaxP99 time.Duration
	// Pass: availability at least Floor and p99 at most MaxP99.
	Pass bool
}

// phaseAcc accumulates one phase.
type phaseAcc struct {
	st  PhaseStats
	lat []int64
}

func (a *phaseAcc) add(o history.Op, deadline time.Duration) {
	a.st.Ops++
	switch o.Outcome {
	case history.Allowed:
		a.st.Allowed++
	case history.Denied:
		a.st.Denied++
	case history.Error:
		a.st.Errors++
	case history.Timeout:
		a.st.Timeouts++
	}
	if !o.Outcome.Answered() {
		return
	}
	lat := o.Complete - o.Invoke
	a.lat = append(a.lat, lat)
	if deadline <= 0 || lat <= int64(deadline) {
		a.st.Answered++
	} else {
		a.st.Late++
	}
}

func (a *phaseAcc) finish(floor float64, maxP99 time.Duration) PhaseStats {
	st := a.st
	st.Availability = 1
	if st.Ops > 0 {
		st.Availability = float64(st.Answered) / float64(st.Ops)
	}
	if n := len(a.lat); n > 0 {
		sort.Slice(a.lat, func(i, j int) bool { return a.lat[i] < a.lat[j] })
		st.P50 = time.Duration(a.lat[rank(n, 0.50)])
		st.P99 = time.Duration(a.lat[rank(n, 0.99)])
		st.Max = time.Duration(a.lat[n-1])
	}
	st.Floor, st.MaxP99 = floor, maxP99
	st.Pass = st.Availability >= floor && (maxP99 == 0 || st.P99 <= maxP99)
	return st
}

// rank is the nearest-rank index of quantile q among n sorted values.
func rank(n int, q float64) int {
	i := int(q*float64(n)+0.999999999) - 1
	return min(max(i, 0), n-1)
}
