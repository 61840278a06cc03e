package checker

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/weirhq/weir/chaos/history"
)

// eps absorbs float rounding when integer units are compared with a bound.
const eps = 1e-9

// maxErrors caps the sanity errors listed one by one.
const maxErrors = 20

// limitState is a limit being checked.
type limitState struct {
	spec   history.LimitSpec
	res    *LimitResult
	strict bool
	crash  float64 // crash term in units
	keys   map[string]*keyData
}

type keyData struct {
	// permits are a concurrency limit's operations (checkPermits).
	permits []permitOp
	adm     []span
	denied  []int64 // invoke times of non-fallback denials
	ops     []keyOp // every operation that names the key, for the gap
	ks      *keySpans
}

type checker struct {
	h      *history.History
	cfg    Config
	r      *Result
	limits []*limitState
	byName map[string]*limitState
	buf    []uint8
	// nodes numbers the nodes (header nodes first) for per-node fallback
	// terms; members is their member counts over time.
	nodes   []string
	nodeIdx map[string]int
	members membership
}

// Check judges h. It does not modify h.
func Check(h *history.History, cfg Config) Result {
	cfg = cfg.withDefaults()
	c := &checker{h: h, cfg: cfg, byName: map[string]*limitState{}, nodeIdx: map[string]int{}}
	for _, n := range h.Header.Nodes {
		c.nodeIndex(n)
	}
	r := &Result{Scenario: h.Header.Scenario, Ops: len(h.Ops), Config: cfg, Fallback: map[string]FallbackStats{}}
	c.r = r
	c.timeRange()
	var notes []string
	r.Faults, notes = pairFaults(h.Events, r.End)
	r.Notes = append(r.Notes, notes...)
	c.members = newMembership(h.Events, r.Nodes)
	c.setupLimits()
	c.scanOps()
	for _, ls := range c.limits {
		if ls.spec.Concurrency() {
			c.checkPermits(ls)
			continue
		}
		c.checkLimit(ls)
	}
	c.checkState()
	c.leaseResults()
	for _, l := range r.Limits {
		if l.Gap.Length > r.Gap.Length {
			r.Gap = l.Gap
		}
	}
	c.collect()
	return *r
}

// timeRange sets Start, End and Nodes.
func (c *checker) timeRange() {
	r, h := c.r, c.h
	lo, hi, seen := int64(math.MaxInt64), int64(math.MinInt64), false
	nodes := map[string]bool{}
	for _, o := range h.Ops {
		if o.Complete < o.Invoke {
			continue
		}
		lo, hi, seen = min(lo, o.Invoke), max(hi, o.Complete), true
		if o.Node != "" {
			nodes[o.Node] = true
		}
	}
	for _, e := range h.Events {
		lo, hi, seen = min(lo, e.Time), max(hi, e.Time), true
	}
	if !seen {
		lo, hi = h.Header.Start, h.Header.Start
	}
	r.Start = h.Header.Start
	if r.Start == 0 {
		r.Start = lo
	}
	r.End = max(hi, r.Start)
	r.Nodes = len(h.Header.Nodes)
	if r.Nodes == 0 {
		r.Nodes = max(len(nodes), 1)
		r.Notes = append(r.Notes, fmt.Sprintf("header names no nodes; the local fallback bound assumes %d (the nodes operations were sent to)", r.Nodes))
	}
}

func (c *checker) setupLimits() {
	r := c.r
	for _, spec := range c.h.Header.Limits {
		if _, dup := c.byName[spec.Name]; dup {
			r.Errors = append(r.Errors, fmt.Sprintf("limit %q is declared twice in the header", spec.Name))
			continue
		}
		if spec.Interval <= 0 || spec.Burst < 0 {
			r.Errors = append(r.Errors, fmt.Sprintf("limit %q has interval %s and burst %d; it cannot be checked",
				spec.Name, spec.Interval, spec.Burst))
			continue
		}
		switch spec.Consistency {
		case "", "fast", "strict":
		default:
			r.Notes = append(r.Notes, fmt.Sprintf("limit %q: unknown consistency %q, checked as fast", spec.Name, spec.Consistency))
		}
		switch spec.OnFailure {
		case "open", "closed", "local":
		default:
			r.Notes = append(r.Notes, fmt.Sprintf("limit %q: unknown on_failure %q, fallback admissions are not bounded", spec.Name, spec.OnFailure))
		}
		r.Limits = append(r.Limits, LimitResult{Spec: spec})
		ls := &limitState{spec: spec, strict: spec.Consistency == "strict",
			crash: crashUnits(c.cfg.CrashLoss, spec.Interval), keys: map[string]*keyData{}}
		c.limits = append(c.limits, ls)
		c.byName[spec.Name] = ls
	}
	for i, ls := range c.limits {
		ls.res = &r.Limits[i]
		ls.res.FallbackAdmitted = map[string]int64{}
		ls.res.FallbackDecisions = map[string]int{}
		ls.res.FallbackReasons = map[string]int{}
	}
}

// scanOps makes one pass over the operations: sanity, phases, fallback
// counts, and each key's admissions and denials.
func (c *checker) scanOps() {
	r, h := c.r, c.h
	accs := make([]phaseAcc, len(Phases))
	for i, p := range Phases {
		accs[i].st.Phase = p
	}
	invalid := 0
	unknown := map[string]int{}
	gone := newDepartures(h.Events, r.End)
	for _, o := range h.Ops {
		if o.Complete < o.Invoke {
			if invalid++; invalid <= maxErrors {
				r.Errors = append(r.Errors, fmt.Sprintf("op %d: completes before it is invoked (invoke %.3fs, complete %.3fs)",
					o.ID, secondsSince(o.Invoke, r.Start), secondsSince(o.Complete, r.Start)))
			}
			continue
		}
		acc := &accs[0]
		switch c.r.PhaseAt(o.Invoke) {
		case PhaseFault:
			acc = &accs[1]
		case PhaseRecovery:
			acc = &accs[2]
		}
		switch {
		case gone.gone(o.Node, o.Invoke):
			acc.st.Drained++
		case starved(r.Faults, o.Node, o.Invoke):
			acc.st.Starved++
			if o.Outcome.Answered() && o.Latency() <= h.Header.Deadline {
				acc.st.StarvedAnswered++
			}
		default:
			acc.add(o, h.Header.Deadline)
		}
		cost := max(o.Cost, 1)
		fb := o.Fallback()
		if fb && o.Outcome.Answered() {
			st := r.Fallback[o.FallbackMode]
			st.Decisions++
			if o.Outcome == history.Allowed {
				st.Allowed++
				st.Units += cost
			}
			r.Fallback[o.FallbackMode] = st
		}
		attributed := slices.ContainsFunc(o.Limits, func(lk history.LimitKey) bool { return lk.Denied })
		for _, lk := range o.Limits {
			ls, ok := c.byName[lk.Name]
			if !ok {
				unknown[lk.Name]++
				continue
			}
			kd := ls.keys[lk.Key]
			if kd == nil {
				kd = &keyData{}
				ls.keys[lk.Key] = kd
			}
			if fb && o.Outcome.Answered() {
				ls.res.FallbackDecisions[o.FallbackMode]++
				ls.res.FallbackReasons[o.FallbackReason]++
			}
			if ls.spec.Concurrency() {
				kd.permits = append(kd.permits, permitOp{inv: o.Invoke, comp: o.Complete, cost: cost, outcome: o.Outcome,
					fb: fb, denied: lk.Denied || !attributed, life: o.Permit})
			}
			if lk.Key != "" {
				kd.ops = append(kd.ops, keyOp{inv: o.Invoke, comp: o.Complete, normal: o.Outcome.Answered() && !fb})
			}
			switch o.Outcome {
			case history.Allowed:
				kd.adm = append(kd.adm, span{inv: o.Invoke, comp: o.Complete, cost: cost, fb: fb, node: int32(c.nodeIndex(o.Node))})
				ls.res.AdmittedOps++
				ls.res.Admitted += cost
				if fb {
					ls.res.FallbackAdmitted[o.FallbackMode] += cost
				}
			case history.Denied:
				// A composite's denial saturates only the limits that
				// refused it; a history without per-limit verdicts
				// counts it against every limit.
				if !fb && (lk.Denied || !attributed) {
					kd.denied = append(kd.denied, o.Invoke)
				}
			}
		}
	}
	if invalid > maxErrors {
		r.Errors = append(r.Errors, fmt.Sprintf("… and %d more operations with impossible times", invalid-maxErrors))
	}
	for _, name := range slices.Sorted(maps.Keys(unknown)) {
		r.Errors = append(r.Errors, fmt.Sprintf("limit %q is not in the header (%d operations name it)", name, unknown[name]))
	}
	for i, p := range Phases {
		r.Phases = append(r.Phases, accs[i].finish(c.cfg.floor(p), c.cfg.MaxP99))
	}
}

// allowance is what normal admissions of ls in [s, e] are held to.
func (c *checker) allowance(ls *limitState, s, e int64, w time.Duration) (allow float64, owners, crashes int) {
	owners = 1
	for _, f := range c.r.Faults {
		if !f.overlaps(s, e, c.cfg.Recovery) {
			continue
		}
		if !ls.strict && f.Owners > owners {
			owners = f.Owners
		}
		if f.Crash {
			crashes++
		}
	}
	return ls.spec.Bound(w)*float64(owners) + float64(crashes)*ls.crash, owners, crashes
}

// judgesTotal reports whether ls's normal and fallback admissions are
// judged together against the normal and fallback terms (on_failure local,
// written or by default); open limits report fallback admissions apart,
// closed ones must not make any.
func (ls *limitState) judgesTotal() bool { return ls.spec.OnFailure == "local" }

// window fills in the bounds of a window of ls; perNode is the fallback
// cost per node index.
func (c *checker) window(ls *limitState, key string, s int64, w time.Duration, adm, fb int64, perNode []int64) Window {
	win := Window{Key: key, Start: s, Width: w, Admitted: adm, Fallback: fb, Bound: ls.spec.Bound(w)}
	win.Allowance, win.Owners, win.Crashes = c.allowance(ls, s, s+int64(w), w)
	win.Excess = float64(adm+fb) - win.Bound
	switch {
	case ls.judgesTotal():
		win.FallbackTerms, win.FallbackAllowance = c.fallbackTerms(ls, perNode, s, w)
		win.Pass = float64(adm+fb) <= win.Allowance+win.FallbackAllowance+eps
	case ls.spec.OnFailure == "closed":
		win.Pass = float64(adm) <= win.Allowance+eps && fb == 0
	default:
		win.FallbackUnbounded = true
		win.Pass = float64(adm) <= win.Allowance+eps
	}
	return win
}

// run accumulates overlapping violating windows of one kind.
type run struct {
	on    bool
	end   int64
	worst Violation
	over  float64
}

func (c *checker) see(ls *limitState, r *run, v Violation, over float64) {
	if r.on && v.Start > r.end {
		c.emit(ls, r)
	}
	if !r.on {
		*r = run{on: true, worst: v, over: over}
	}
	r.worst.Windows++
	r.end = v.Start + int64(v.Width)
	if over > r.over {
		n := r.worst.Windows
		r.worst, r.over = v, over
		r.worst.Windows = n
	}
}

func (c *checker) emit(ls *limitState, r *run) {
	if !r.on {
		return
	}
	if len(ls.res.Violations) < c.cfg.MaxViolations {
		ls.res.Violations = append(ls.res.Violations, r.worst)
	} else {
		ls.res.Dropped++
	}
	r.on = false
}

// checkLimit runs the window-bound check over every key of ls.
func (c *checker) checkLimit(ls *limitState) {
	res := ls.res
	keys := slices.Sorted(maps.Keys(ls.keys))
	res.Keys = len(keys)
	for _, k := range keys {
		kd := ls.keys[k]
		kd.ks = newKeySpans(kd.adm)
		var total int64
		for _, s := range kd.adm {
			total += s.cost
		}
		if total > res.TopKeyAdmitted {
			res.TopKey, res.TopKeyAdmitted = k, total
		}
		if g := keyGap(kd.ops, c.h.Header.Deadline); g.Length > res.Gap.Length {
			g.Limit, g.Key = ls.spec.Name, k
			res.Gap = g
		}
	}
	var overall worst
	for _, w := range c.cfg.Windows {
		var ww worst
		for _, k := range keys {
			c.sweepKey(ls, k, w, &ww)
		}
		if ww.found {
			res.WorstByWidth = append(res.WorstByWidth, c.window(ls, ww.key, ww.start, w, ww.adm, ww.fb, ww.perNode))
			if !overall.found || ww.excess > overall.excess {
				overall = ww
			}
		}
	}
	if overall.found {
		res.Worst = c.window(ls, overall.key, overall.start, overall.width, overall.adm, overall.fb, overall.perNode)
	}
	if ls.spec.OnFailure == "closed" {
		c.checkClosed(ls, keys)
	}
	res.Pass = res.ViolatingWindows == 0 && res.ClosedAdmits == 0
}

// worst is the window with the largest excess over the plain bound seen so
// far.
type worst struct {
	key     string
	start   int64
	adm, fb int64
	perNode []int64
	excess  float64
	found   bool
	width   time.Duration
}

// sweepKey checks every window of width w of key k that starts at an
// admission, recording violations and the worst window in ww.
func (c *checker) sweepKey(ls *limitState, k string, w time.Duration, ww *worst) {
	ks := ls.keys[k].ks
	if len(ks.sp) == 0 {
		return
	}
	bound := ls.spec.Bound(w)
	sw := newSweeper(ks, c.buf, len(c.nodes))
	c.buf = sw.state
	var runs [2]run
	for i, sp := range ks.sp {
		if i > 0 && sp.inv == ks.sp[i-1].inv {
			continue
		}
		s, e := sp.inv, sp.inv+int64(w)
		sw.advance(s, e)
		a, f := sw.nonfb, sw.fb
		if a+f == 0 {
			continue
		}
		if ex := float64(a+f) - bound; !ww.found || ex > ww.excess {
			*ww = worst{key: k, start: s, adm: a, fb: f, perNode: slices.Clone(sw.fbNode), excess: ex, found: true, width: w}
		}
		judged := a
		if ls.judgesTotal() {
			judged += f
		}
		if float64(judged) <= bound+eps {
			continue
		}
		allow, _, _ := c.allowance(ls, s, e, w)
		if float64(judged) <= allow+eps {
			continue
		}
		v := Violation{Kind: KindAdmitted, Limit: ls.spec.Name, Key: k, Start: s, Width: w, Admitted: judged,
			Allowance: allow, Bound: bound}
		ri := 0
		if ls.judgesTotal() && f > 0 {
			terms, sum := c.fallbackTerms(ls, sw.fbNode, s, w)
			if float64(judged) <= allow+sum+eps {
				continue
			}
			v.Kind, v.Fallback, v.NormalAllow, v.FallbackTerms, v.Allowance = KindFallback, f, allow, terms, allow+sum
			ri = 1
		}
		ls.res.ViolatingWindows++
		c.see(ls, &runs[ri], v, float64(judged)-v.Allowance)
	}
	c.emit(ls, &runs[0])
	c.emit(ls, &runs[1])
}

// checkClosed reports every admission a closed failure policy made; each
// run of them within the first window width is one violation.
func (c *checker) checkClosed(ls *limitState, keys []string) {
	w := time.Second
	if len(c.cfg.Windows) > 0 {
		w = c.cfg.Windows[0]
	}
	for _, k := range keys {
		var r run
		for _, sp := range ls.keys[k].ks.sp {
			if !sp.fb {
				continue
			}
			ls.res.ClosedAdmits++
			if r.on && sp.inv <= r.worst.Start+int64(w) {
				r.worst.Admitted += sp.cost
				r.worst.Windows++
				r.worst.Width = max(r.worst.Width, time.Duration(sp.comp-r.worst.Start))
				continue
			}
			c.emit(ls, &r)
			r = run{on: true, worst: Violation{Kind: KindClosed, Limit: ls.spec.Name, Key: k, Start: sp.inv,
				Width: time.Duration(sp.comp - sp.inv), Admitted: sp.cost, Bound: ls.spec.Bound(w), Windows: 1}}
		}
		c.emit(ls, &r)
	}
}

// checkState runs the state-survival check at each crash's start and end,
// and at the end of each fault that may leave a node with stale memory.
func (c *checker) checkState() {
	var faults []Fault
	for _, f := range c.r.Faults {
		if f.Crash || f.Stale {
			faults = append(faults, f)
		}
	}
	if len(faults) == 0 {
		return
	}
	st := &c.r.State
	ws, lb := c.cfg.StateWindow, int64(c.cfg.StateLookback)
	type edge struct {
		name string
		at   int64
	}
	for _, ls := range c.limits {
		if ls.spec.Concurrency() {
			continue // its permits are judged by checkPermits
		}
		if ls.spec.Burst < c.cfg.StateMinBurst {
			st.Skipped = append(st.Skipped, fmt.Sprintf("limit %q: burst %d < %d, a fresh burst cannot be told from the slack",
				ls.spec.Name, ls.spec.Burst, c.cfg.StateMinBurst))
			continue
		}
		keys := slices.Sorted(maps.Keys(ls.keys))
		for _, k := range keys {
			d := ls.keys[k].denied
			sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		}
		for _, f := range faults {
			allowed := float64(ws)/float64(ls.spec.Interval) + c.cfg.StateSlack*float64(ls.spec.Burst)
			var edges []edge
			if f.Crash {
				allowed += ls.crash
				edges = append(edges, edge{"start", f.Start})
			}
			if f.Ended {
				edges = append(edges, edge{"end", f.End})
			}
			for _, edge := range edges {
				t := edge.at
				for _, k := range keys {
					kd := ls.keys[k]
					if !deniedIn(kd.denied, t-lb, t) {
						continue
					}
					adm := kd.ks.costInside(t, t+int64(ws), false)
					sc := StateCheck{Limit: ls.spec.Name, Key: k, FaultID: f.ID, Fault: f.Name, Edge: edge.name,
						At: t, Width: ws, Admitted: adm, Allowed: allowed, Pass: float64(adm) <= allowed+eps}
					st.Checks = append(st.Checks, sc)
					if !sc.Pass {
						st.Failed++
					}
				}
			}
		}
	}
}

// deniedIn reports whether the sorted denial times have one in [lo, hi).
func deniedIn(denied []int64, lo, hi int64) bool {
	i := sort.Search(len(denied), func(i int) bool { return denied[i] >= lo })
	return i < len(denied) && denied[i] < hi
}

// collect gathers the readable violations.
func (c *checker) collect() {
	r := c.r
	for _, l := range r.Limits {
		for _, v := range l.Violations {
			r.Violations = append(r.Violations, v.Describe(r.Start))
		}
		if l.Dropped > 0 {
			r.Violations = append(r.Violations, fmt.Sprintf("limit %q: %d more violations not listed (%d violating windows in all)",
				l.Spec.Name, l.Dropped, l.ViolatingWindows))
		}
	}
	for _, sc := range r.State.Checks {
		if sc.Pass {
			continue
		}
		v := Violation{Kind: KindState, Limit: sc.Limit, Key: sc.Key, Start: sc.At, Width: sc.Width,
			Admitted: sc.Admitted, Allowance: sc.Allowed}
		if ls := c.byName[sc.Limit]; ls != nil {
			v.Bound = ls.spec.Bound(sc.Width)
		}
		r.Violations = append(r.Violations, v.Describe(r.Start)+fmt.Sprintf(" (fault %q %s)", sc.Fault, sc.Edge))
	}
	for _, p := range r.Phases {
		if p.Drained > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("%s phase: %d calls sent to nodes that had left the cluster on purpose are not counted in availability",
				p.Phase, p.Drained))
		}
		if p.Starved > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("%s phase: %d calls sent to nodes starved of CPU by the fault, %d (%.2f%%) of them answered within the deadline: reported, not counted in availability",
				p.Phase, p.Starved, p.StarvedAnswered, 100*float64(p.StarvedAnswered)/float64(p.Starved)))
		}
		if p.Availability < p.Floor {
			r.Violations = append(r.Violations, fmt.Sprintf("availability in the %s phase: %.2f%% of %d operations answered within the deadline, floor %.2f%%",
				p.Phase, 100*p.Availability, p.Ops, 100*p.Floor))
		}
		if p.MaxP99 > 0 && p.P99 > p.MaxP99 {
			r.Violations = append(r.Violations, fmt.Sprintf("latency in the %s phase: p99 %s of %d answered operations, ceiling %s",
				p.Phase, p.P99, p.Answered+p.Late, p.MaxP99))
		}
	}
}

func secondsSince(t, start int64) float64 { return float64(t-start) / 1e9 }

// Units renders a number of units the way violations do: an integer when
// it is one, else with two decimals.
func Units(x float64) string {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	if r := math.Round(x); math.Abs(x-r) < 1e-6 {
		return strconv.FormatFloat(r, 'f', -1, 64)
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}
