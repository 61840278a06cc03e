package checker

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/chaos/history"
)

const (
	ms  = int64(time.Millisecond)
	sec = int64(time.Second)
)

// t0 is the start of every synthetic run.
const t0 = int64(1_700_000_000) * sec

func newHistory(limits ...history.LimitSpec) *history.History {
	return &history.History{Header: history.Header{
		Scenario: "synthetic",
		Nodes:    []string{"n1", "n2", "n3"},
		Limits:   limits,
		Deadline: 250 * time.Millisecond,
		Start:    t0,
	}}
}

func fast(name string, interval time.Duration, burst int64) history.LimitSpec {
	return history.LimitSpec{Name: name, Interval: interval, Burst: burst, Consistency: "fast", OnFailure: "open"}
}

// gcra is an exact GCRA in nanoseconds: the reference the checker's bound
// is derived from.
type gcra struct{ tat, t, b int64 }

func newGCRA(t time.Duration, b int64) *gcra { return &gcra{t: int64(t), b: b} }

func (g *gcra) decide(now, cost int64) bool {
	newTAT := max(g.tat, now) + cost*g.t
	if newTAT-g.b*g.t > now {
		return false
	}
	g.tat = newTAT
	return true
}

// stream describes a client saturating one key: a call every `every` from
// `from` to `to` (offsets from t0), each decided by pick(t) at its decision
// time, with latency before and after the decision drawn from lat.
type stream struct {
	limits []history.LimitKey
	from   int64
	to     int64
	every  int64
	cost   int64
	node   string
	// decide returns the outcome and fallback mode of the call decided at t.
	decide func(t int64) (history.Outcome, string)
	lat    func() (pre, post int64)
}

func (s stream) add(h *history.History) {
	for t := t0 + s.from; t < t0+s.to; t += s.every {
		out, mode := s.decide(t)
		pre, post := int64(0), int64(0)
		if s.lat != nil {
			pre, post = s.lat()
		}
		o := history.Op{ID: int64(len(h.Ops) + 1), Node: s.node, Invoke: t - pre, Complete: t + post,
			Limits: s.limits, Cost: s.cost, Outcome: out, FallbackMode: mode}
		if mode != "" {
			o.FallbackReason = "owner_unreachable"
		}
		if o.Node == "" {
			o.Node = "n1"
		}
		h.Ops = append(h.Ops, o)
	}
}

// byGCRA decides with g, normally.
func byGCRA(g *gcra, cost int64) func(int64) (history.Outcome, string) {
	return func(t int64) (history.Outcome, string) {
		if g.decide(t, cost) {
			return history.Allowed, ""
		}
		return history.Denied, ""
	}
}

func keys(name, key string) []history.LimitKey { return []history.LimitKey{{Name: name, Key: key}} }

func randLatency(seed uint64, maxPre, maxPost int64) func() (int64, int64) {
	r := rand.New(rand.NewPCG(seed, 1))
	return func() (int64, int64) { return r.Int64N(maxPre + 1), r.Int64N(maxPost + 1) }
}

func event(at int64, kind history.EventKind, id int, fault string, owners int, crash bool) history.Event {
	return history.Event{Time: t0 + at, Kind: kind, ID: id, Fault: fault, Owners: owners, Crash: crash}
}

func mustPass(t *testing.T, r Result) {
	t.Helper()
	if !r.OK() {
		t.Fatalf("want pass, got violations %q errors %q", r.Violations, r.Errors)
	}
}

func mustFail(t *testing.T, r Result, want ...string) {
	t.Helper()
	if r.OK() {
		t.Fatalf("want failure, passed")
	}
	all := strings.Join(r.Violations, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("violations do not mention %q:\n%s", w, all)
		}
	}
}

func TestPerfectGCRAPasses(t *testing.T) {
	unit := fast("unit", 100*time.Millisecond, 10)
	bulk := fast("bulk", 50*time.Millisecond, 20)
	bulk.Consistency = "strict"
	h := newHistory(unit, bulk)
	for i, k := range []string{"a", "b"} {
		g := newGCRA(unit.Interval, unit.Burst)
		stream{limits: keys("unit", k), to: 30 * sec, every: 13 * ms, cost: 1,
			decide: byGCRA(g, 1), lat: randLatency(uint64(i), 3*ms, 3*ms)}.add(h)
		g2 := newGCRA(bulk.Interval, bulk.Burst)
		stream{limits: keys("bulk", k), to: 30 * sec, every: 7 * ms, cost: 3,
			decide: byGCRA(g2, 3), lat: randLatency(uint64(10+i), 2*ms, 2*ms)}.add(h)
	}
	h.Sort()
	r := Check(h, DefaultConfig())
	mustPass(t, r)
	for _, l := range r.Limits {
		if l.Worst.Excess > 0 || !l.Worst.Pass {
			t.Errorf("%s: worst window %+v", l.Spec.Name, l.Worst)
		}
		// The stream saturates the key: the worst window is close to the
		// bound, so the check is not passing vacuously.
		for _, w := range l.WorstByWidth {
			if float64(w.Admitted) < w.Bound-2*3 {
				t.Errorf("%s: worst %s window admitted %d, bound %v: not saturated", l.Spec.Name, w.Width, w.Admitted, w.Bound)
			}
		}
		if l.Keys != 2 || l.Admitted == 0 || l.TopKey == "" {
			t.Errorf("%s: keys %d admitted %d top %q", l.Spec.Name, l.Keys, l.Admitted, l.TopKey)
		}
	}
	if p := r.Phase(PhaseHealthy); p.Ops != len(h.Ops) || p.Denied == 0 || p.Allowed == 0 || p.P99 <= 0 {
		t.Errorf("healthy phase %+v", p)
	}
}

// exact is a zero-latency saturating stream of key k1 of limit l: with
// burst 5 and T = 100ms, [t0, t0+1s] admits exactly 15 units.
func exact(l history.LimitSpec, to int64) *history.History {
	h := newHistory(l)
	g := newGCRA(l.Interval, l.Burst)
	stream{limits: keys(l.Name, "k1"), to: to, every: 10 * ms, cost: 1, decide: byGCRA(g, 1)}.add(h)
	return h
}

func TestOneUnitTooMany(t *testing.T) {
	l := fast("lim", 100*time.Millisecond, 5)
	h := exact(l, 3*sec)
	r := Check(h, DefaultConfig())
	mustPass(t, r)
	if w := r.Limits[0].WorstByWidth[0]; w.Admitted != 15 || w.Bound != 15 || w.Excess != 0 || w.Start != t0 {
		t.Fatalf("worst 1s window %+v, want 15 admitted from t0", w)
	}

	h.Ops = append(h.Ops, history.Op{ID: 999, Invoke: t0 + 550*ms, Complete: t0 + 550*ms, Cost: 1,
		Limits: keys("lim", "k1"), Outcome: history.Allowed})
	h.Sort()
	r = Check(h, DefaultConfig())
	mustFail(t, r, `limit "lim" key "k1": 16 units admitted in window [0.000s, +1s], allowance 15`)
	if lr := r.Limits[0]; lr.Pass || lr.Worst.Excess != 1 || lr.ViolatingWindows == 0 || len(lr.Violations) != 1 {
		t.Fatalf("limit result %+v", lr)
	}
}

// split is a key decided by one owner, and by two owners (each with its own
// state) during [5s, 10s].
func split(l history.LimitSpec) *history.History {
	h := newHistory(l)
	g1, g2 := newGCRA(l.Interval, l.Burst), newGCRA(l.Interval, l.Burst)
	n := 0
	stream{limits: keys(l.Name, "hot"), to: 25 * sec, every: 10 * ms, cost: 1, lat: randLatency(7, ms, ms),
		decide: func(t int64) (history.Outcome, string) {
			g := g1
			if n++; t >= t0+5*sec && t < t0+10*sec && n%2 == 0 {
				g = g2
			}
			return byGCRA(g, 1)(t)
		}}.add(h)
	h.Events = []history.Event{
		event(5*sec, history.FaultStart, 1, "partition-node", 2, false),
		event(10*sec, history.FaultEnd, 1, "partition-node", 0, false),
	}
	h.Sort()
	return h
}

func TestSplitOwnership(t *testing.T) {
	l := fast("lim", 100*time.Millisecond, 5)
	r := Check(split(l), DefaultConfig())
	mustPass(t, r)
	if w := r.Limits[0].Worst; w.Owners != 2 || w.Excess <= 0 || w.Allowance != 2*w.Bound {
		t.Fatalf("worst window %+v: want the split term to apply", w)
	}

	l.Consistency = "strict"
	r = Check(split(l), DefaultConfig())
	mustFail(t, r, `limit "lim" key "hot"`)
	if w := r.Limits[0].Worst; w.Owners != 1 || w.Pass {
		t.Fatalf("strict worst window %+v", w)
	}
}

func TestLocalFallback(t *testing.T) {
	l := history.LimitSpec{Name: "loc", Interval: 100 * time.Millisecond, Burst: 5, Consistency: "fast",
		OnFailure: "local", FallbackInterval: time.Second, FallbackBurst: 2}
	build := func(fallback func(node int) func(int64) (history.Outcome, string)) *history.History {
		h := newHistory(l)
		g := newGCRA(l.Interval, l.Burst)
		normal := byGCRA(g, 1)
		for node := 0; node < 3; node++ {
			fb := fallback(node)
			stream{limits: keys("loc", "k"), from: int64(node) * ms, to: 20 * sec, every: 30 * ms, cost: 1,
				node: fmt.Sprintf("n%d", node+1),
				decide: func(t int64) (history.Outcome, string) {
					if t >= t0+5*sec && t < t0+10*sec {
						return fb(t)
					}
					return normal(t)
				}}.add(h)
		}
		h.Events = []history.Event{
			event(5*sec, history.FaultStart, 1, "partition-node", 1, false),
			event(10*sec, history.FaultEnd, 1, "partition-node", 0, false),
		}
		h.Sort()
		return h
	}
	// Within the bound: each node decides at the fallback rate.
	h := build(func(int) func(int64) (history.Outcome, string) {
		g := newGCRA(l.FallbackInterval, l.FallbackBurst)
		return func(t int64) (history.Outcome, string) {
			if g.decide(t, 1) {
				return history.Allowed, "local"
			}
			return history.Denied, "local"
		}
	})
	r := Check(h, DefaultConfig())
	mustPass(t, r)
	lr := r.Limits[0]
	if lr.FallbackAdmitted["local"] == 0 || lr.FallbackDecisions["local"] <= int(lr.FallbackAdmitted["local"]) ||
		lr.FallbackReasons["owner_unreachable"] != lr.FallbackDecisions["local"] {
		t.Fatalf("fallback counts %+v %+v %+v", lr.FallbackAdmitted, lr.FallbackDecisions, lr.FallbackReasons)
	}
	if st := r.Fallback["local"]; st.Decisions != lr.FallbackDecisions["local"] || int64(st.Allowed) != st.Units {
		t.Fatalf("result fallback stats %+v", st)
	}
	if w := lr.WorstByWidth[0]; w.FallbackAllowance != 9 || w.FallbackUnbounded {
		t.Fatalf("fallback allowance %+v, want 3 nodes × (2 + 1)", w)
	}

	// Beyond it: the fallback admits everything.
	h = build(func(int) func(int64) (history.Outcome, string) {
		return func(int64) (history.Outcome, string) { return history.Allowed, "local" }
	})
	mustFail(t, Check(h, DefaultConfig()), `limit "loc" key "k": 102 units admitted (0 normally, 102 by fallback)`,
		"allowance 24 = normal 15 + fallback [n1: 2 + 1s × 1/s = 3; n2: 2 + 1s × 1/s = 3; n3: 2 + 1s × 1/s = 3]")
}

func TestClosedFallback(t *testing.T) {
	l := history.LimitSpec{Name: "login", Interval: 500 * time.Millisecond, Burst: 5, Consistency: "strict", OnFailure: "closed"}
	h := exact(l, 3*sec)
	h.Ops = append(h.Ops, history.Op{ID: 1000, Invoke: t0 + 1500*ms, Complete: t0 + 1510*ms, Cost: 1,
		Limits: keys("login", "k1"), Outcome: history.Denied, FallbackMode: "closed", FallbackReason: "redis_unavailable"})
	h.Sort()
	r := Check(h, DefaultConfig())
	mustPass(t, r)
	if r.Limits[0].FallbackDecisions["closed"] != 1 {
		t.Fatalf("closed decisions %v", r.Limits[0].FallbackDecisions)
	}

	h.Ops = append(h.Ops, history.Op{ID: 1001, Invoke: t0 + 2500*ms, Complete: t0 + 2510*ms, Cost: 1,
		Limits: keys("login", "k1"), Outcome: history.Allowed, FallbackMode: "closed", FallbackReason: "redis_unavailable"})
	h.Sort()
	r = Check(h, DefaultConfig())
	mustFail(t, r, `limit "login" key "k1": 1 units admitted by a closed failure policy in window [2.500s, +10ms]`)
	if r.Limits[0].ClosedAdmits != 1 {
		t.Fatalf("closed admits %d", r.Limits[0].ClosedAdmits)
	}
}

// crash is a saturated key of l through a crash fault [10s, 14s]; reset
// says when (if ever) its state is lost and it restarts from a full burst.
func crash(l history.LimitSpec, reset int64) *history.History {
	small := fast("small", 100*time.Millisecond, 2)
	h := newHistory(l, small)
	g := newGCRA(l.Interval, l.Burst)
	done := false
	stream{limits: keys(l.Name, "hot"), to: 20 * sec, every: 10 * ms, cost: 1, lat: randLatency(3, ms, 2*ms),
		decide: func(t int64) (history.Outcome, string) {
			if reset > 0 && !done && t >= t0+reset {
				g.tat, done = 0, true
			}
			return byGCRA(g, 1)(t)
		}}.add(h)
	gs := newGCRA(small.Interval, small.Burst)
	stream{limits: keys("small", "s"), to: 20 * sec, every: 50 * ms, cost: 1, decide: byGCRA(gs, 1)}.add(h)
	h.Events = []history.Event{
		event(10*sec, history.FaultStart, 4, "kill-owner", 1, true),
		event(14*sec, history.FaultEnd, 4, "kill-owner", 0, false),
	}
	h.Sort()
	return h
}

func TestStateSurvival(t *testing.T) {
	l := fast("tenant", 100*time.Millisecond, 20)
	// Continuing at rate: the new owner resumed from the flushed TAT.
	r := Check(crash(l, 0), DefaultConfig())
	mustPass(t, r)
	st := r.State
	if len(st.Checks) != 2 || st.Failed != 0 {
		t.Fatalf("state checks %+v", st)
	}
	for _, c := range st.Checks {
		// 3s/100ms + 0.5 × 20 + (ceil(50ms/100ms) + 1)
		if c.Key != "hot" || c.Allowed != 42 || c.Admitted < 28 || c.Admitted > 31 {
			t.Errorf("check %+v", c)
		}
	}
	if len(st.Skipped) != 1 || !strings.Contains(st.Skipped[0], `"small"`) {
		t.Errorf("skipped %q, want the burst-2 limit", st.Skipped)
	}

	// Restarted from a full burst when the owner died.
	r = Check(crash(l, 10*sec), DefaultConfig())
	mustFail(t, r, `limit "tenant" key "hot": state lost`, `(fault "kill-owner" start)`)
	if r.State.Failed != 1 || r.State.Checks[0].Pass || r.State.Checks[0].Admitted < 45 {
		t.Fatalf("state %+v", r.State)
	}
	// Or when it restarted with empty memory.
	r = Check(crash(l, 14*sec), DefaultConfig())
	mustFail(t, r, `(fault "kill-owner" end)`)
	if r.State.Failed != 1 || !r.State.Checks[0].Pass || r.State.Checks[1].Pass {
		t.Fatalf("state %+v", r.State)
	}
}

func TestAvailability(t *testing.T) {
	l := fast("lim", 10*time.Millisecond, 100)
	h := newHistory(l)
	n := 0
	add := func(from, to int64, timeoutEvery int) {
		for t := t0 + from; t < t0+to; t += 10 * ms {
			n++
			o := history.Op{ID: int64(n), Invoke: t, Complete: t + 2*ms, Cost: 1, Limits: keys("lim", "k"), Outcome: history.Allowed}
			if n%timeoutEvery == 0 {
				o.Outcome, o.Complete = history.Timeout, t+250*ms
			}
			h.Ops = append(h.Ops, o)
		}
	}
	add(0, 10*sec, 1000)
	add(10*sec, 20*sec, 2) // half the fault's calls time out: reported only
	add(20*sec, 25*sec, 50)
	add(25*sec, 40*sec, 1000)
	h.Events = []history.Event{
		event(10*sec, history.FaultStart, 1, "redis-cut", 1, false),
		event(20*sec-1, history.FaultEnd, 1, "redis-cut", 0, false),
	}
	h.Sort()
	r := Check(h, DefaultConfig())
	mustPass(t, r)
	if f := r.Phase(PhaseFault); f.Availability > 0.51 || f.Timeouts == 0 || !f.Pass {
		t.Fatalf("fault phase %+v", f)
	}
	if rec := r.Phase(PhaseRecovery); rec.Availability >= 0.99 || !rec.Pass {
		t.Fatalf("recovery phase %+v", rec)
	}

	// 5% of healthy calls time out, and a few answers come too late.
	for i := range h.Ops {
		o := &h.Ops[i]
		if r.PhaseAt(o.Invoke) != PhaseHealthy {
			continue
		}
		switch i % 40 {
		case 0, 20:
			o.Outcome, o.Complete = history.Timeout, o.Invoke+250*ms
		case 10:
			o.Complete = o.Invoke + 300*ms // answered past the deadline
		}
	}
	r = Check(h, DefaultConfig())
	mustFail(t, r, "availability in the healthy phase")
	p := r.Phase(PhaseHealthy)
	if p.Pass || p.Late == 0 || p.Availability > 0.93 || p.Max != 300*time.Millisecond {
		t.Fatalf("healthy phase %+v", p)
	}
}

func TestPhases(t *testing.T) {
	l := fast("lim", time.Millisecond, 1000)
	h := newHistory(l)
	at := []int64{0, 10*sec - 1, 10 * sec, 20 * sec, 20*sec + 1, 25 * sec, 25*sec + 1, 39 * sec, 40 * sec, 50 * sec}
	for i, x := range at {
		h.Ops = append(h.Ops, history.Op{ID: int64(i), Invoke: t0 + x, Complete: t0 + x + ms, Cost: 1,
			Limits: keys("lim", "k"), Outcome: history.Denied})
	}
	h.Events = []history.Event{
		event(10*sec, history.FaultStart, 1, "a", 0, false),
		event(20*sec, history.FaultEnd, 1, "a", 0, false),
		event(40*sec, history.FaultStart, 2, "b", 0, false), // never healed
	}
	r := Check(h, DefaultConfig())
	want := []Phase{PhaseHealthy, PhaseHealthy, PhaseFault, PhaseFault, PhaseRecovery, PhaseRecovery,
		PhaseHealthy, PhaseHealthy, PhaseFault, PhaseFault}
	for i, x := range at {
		if got := r.PhaseAt(t0 + x); got != want[i] {
			t.Errorf("op at %v: phase %s, want %s", time.Duration(x), got, want[i])
		}
	}
	if a, f, rec := r.Phase(PhaseHealthy).Ops, r.Phase(PhaseFault).Ops, r.Phase(PhaseRecovery).Ops; a != 4 || f != 4 || rec != 2 {
		t.Errorf("phase counts %d/%d/%d, want 4/4/2", a, f, rec)
	}
	if len(r.Faults) != 2 || r.Faults[1].Ended || r.Faults[1].End != t0+50*sec+ms || r.Faults[0].Owners != 1 {
		t.Errorf("faults %+v", r.Faults)
	}
	if len(r.Notes) == 0 {
		t.Error("an unhealed fault is not noted")
	}
}

func TestOnlyAllowedCounts(t *testing.T) {
	l := fast("lim", time.Second, 1)
	h := newHistory(l)
	outs := []history.Outcome{history.Denied, history.Timeout, history.Error}
	for i := range 300 {
		x := t0 + int64(i)*ms
		h.Ops = append(h.Ops, history.Op{ID: int64(i), Invoke: x, Complete: x + ms, Cost: 5,
			Limits: keys("lim", "k"), Outcome: outs[i%3]})
	}
	r := Check(h, DefaultConfig())
	lr := r.Limits[0]
	// The only finding is availability: two thirds of the calls failed.
	if !lr.Pass || lr.Admitted != 0 || lr.AdmittedOps != 0 || lr.ViolatingWindows != 0 ||
		len(r.Violations) != 1 || !strings.HasPrefix(r.Violations[0], "availability") {
		t.Fatalf("limit %+v violations %q", lr, r.Violations)
	}
}

func TestStraddlingOpNotCounted(t *testing.T) {
	l := fast("lim", time.Second, 1) // bound 2 in 1s
	h := newHistory(l)
	for i, o := range [][2]int64{{0, 0}, {500 * ms, 500 * ms}, {900 * ms, 1100 * ms}} {
		h.Ops = append(h.Ops, history.Op{ID: int64(i), Invoke: t0 + o[0], Complete: t0 + o[1], Cost: 1,
			Limits: keys("lim", "k"), Outcome: history.Allowed})
	}
	cfg := DefaultConfig()
	cfg.Windows = []time.Duration{time.Second}
	r := Check(h, cfg)
	mustPass(t, r)
	if w := r.Limits[0].Worst; w.Admitted != 2 {
		t.Fatalf("worst %+v", w)
	}
	s := Series(h, "lim", "k", time.Second, 100*time.Millisecond)
	if s.Bound != 2 || len(s.Times) != 12 || s.Times[0] != 0 || s.Times[11] != 1.1 ||
		s.Admitted[4] != 1 || s.Admitted[5] != 2 || s.Admitted[10] != 2 || s.Admitted[11] != 2 {
		t.Fatalf("series %+v", s)
	}
	// The straddling op counted, the bound would be broken.
	h.Ops[2].Complete = t0 + 1000*ms
	mustFail(t, Check(h, cfg), `3 units admitted in window [0.000s, +1s], allowance 2`)
}

// TestSweepMatchesBruteForce compares the two-pointer sweep with counting
// every window directly, on random spans with latencies up to past the
// window width.
func TestSweepMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for trial := range 50 {
		var sp []span
		for range 1 + r.IntN(300) {
			inv := r.Int64N(5 * sec)
			sp = append(sp, span{inv: inv, comp: inv + r.Int64N(1200*ms), cost: 1 + r.Int64N(3), fb: r.IntN(4) == 0})
		}
		ks := newKeySpans(sp)
		w := int64(time.Second)
		sw := newSweeper(ks, nil, 1)
		for i, x := range ks.sp {
			if i > 0 && x.inv == ks.sp[i-1].inv {
				continue
			}
			sw.advance(x.inv, x.inv+w)
			var a, f int64
			for _, y := range ks.sp {
				if y.inv >= x.inv && y.comp <= x.inv+w {
					if y.fb {
						f += y.cost
					} else {
						a += y.cost
					}
				}
			}
			if a != sw.nonfb || f != sw.fb {
				t.Fatalf("trial %d window %d: sweep %d/%d, brute force %d/%d", trial, i, sw.nonfb, sw.fb, a, f)
			}
			if got := ks.costInside(x.inv, x.inv+w, false); got != a {
				t.Fatalf("costInside %d, want %d", got, a)
			}
		}
	}
}

func TestSanity(t *testing.T) {
	l := fast("lim", time.Second, 10)
	h := newHistory(l)
	h.Ops = append(h.Ops,
		history.Op{ID: 1, Invoke: t0 + 10*ms, Complete: t0, Cost: 1, Limits: keys("lim", "k"), Outcome: history.Allowed},
		history.Op{ID: 2, Invoke: t0, Complete: t0 + ms, Cost: 1, Limits: keys("nope", "k"), Outcome: history.Allowed},
	)
	r := Check(h, DefaultConfig())
	if r.OK() || len(r.Errors) != 2 || !strings.Contains(r.Errors[0], "op 1") || !strings.Contains(r.Errors[1], `"nope"`) {
		t.Fatalf("errors %q", r.Errors)
	}
}

func TestZeroConfigIsDefault(t *testing.T) {
	r := Check(exact(fast("lim", 100*time.Millisecond, 5), sec), Config{})
	if !reflect.DeepEqual(r.Config, DefaultConfig()) {
		t.Fatalf("config %+v", r.Config)
	}
}

// big builds n operations over 100 s: a few hot keys decided by an exact
// GCRA, and a long tail of cold keys.
func big(n int) *history.History {
	a := fast("tenant", 500*time.Millisecond, 30)
	b := fast("user", 100*time.Millisecond, 10)
	h := newHistory(a, b)
	r := rand.New(rand.NewPCG(1, 2))
	hot := map[string]*gcra{}
	step := 100 * sec / int64(n)
	for i := range n {
		t := t0 + int64(i)*step
		var k string
		if r.IntN(2) == 0 {
			k = fmt.Sprintf("hot-%d", r.IntN(3))
		} else {
			k = fmt.Sprintf("cold-%d", r.IntN(5000))
		}
		g := hot[k]
		if g == nil {
			g = newGCRA(b.Interval, b.Burst)
			hot[k] = g
		}
		out := history.Denied
		if g.decide(t, 1) {
			out = history.Allowed
		}
		h.Ops = append(h.Ops, history.Op{ID: int64(i), Invoke: t - r.Int64N(2*ms), Complete: t + r.Int64N(3*ms), Cost: 1,
			Limits:  []history.LimitKey{{Name: "user", Key: k}, {Name: "tenant", Key: k}},
			Outcome: out})
	}
	h.Sort()
	return h
}

// TestLargeHistory checks the verdicts and the violation cap on a large
// history. How fast the check runs is BenchmarkCheck200k's business, not a
// timed test's (a 2s budget failed on a loaded machine).
func TestLargeHistory(t *testing.T) {
	h := big(200_000)
	r := Check(h, DefaultConfig())
	if lr := r.Limits[1]; !lr.Pass || lr.AdmittedOps == 0 {
		t.Errorf("user limit %+v", lr.Worst)
	}
	// tenant is decided at the user limit's rate: over its own bound in
	// 5s windows, all the time. Each hot key's overlapping violating
	// windows make one violation.
	if lr := r.Limits[0]; lr.Pass || len(lr.Violations) != 3 || lr.Dropped != 0 || lr.ViolatingWindows < 1000 {
		t.Errorf("tenant limit: pass %v, %d violations kept, %d dropped, %d windows",
			lr.Pass, len(lr.Violations), lr.Dropped, lr.ViolatingWindows)
	}
	cfg := DefaultConfig()
	cfg.MaxViolations = 2
	r = Check(h, cfg)
	if lr := r.Limits[0]; len(lr.Violations) != 2 || lr.Dropped != 1 ||
		!strings.Contains(r.Violations[len(r.Violations)-1], `limit "tenant": 1 more violations not listed`) {
		t.Errorf("capped: %d kept, %d dropped, %q", len(lr.Violations), lr.Dropped, r.Violations)
	}
}

func BenchmarkCheck200k(b *testing.B) {
	h := big(200_000)
	cfg := DefaultConfig()
	b.ResetTimer()
	for b.Loop() {
		Check(h, cfg)
	}
}

func TestCompositeDenialSaturatesOnlyTheRefusingLimit(t *testing.T) {
	a, b := fast("a", 100*time.Millisecond, 10), fast("b", 100*time.Millisecond, 10)
	h := newHistory(a, b)
	// A composite refused by a alone, just before an owner crash.
	h.Ops = append(h.Ops, history.Op{ID: 1, Invoke: t0 + 9*sec, Complete: t0 + 9*sec + ms, Cost: 1, Outcome: history.Denied,
		Limits: []history.LimitKey{{Name: "a", Key: "ka", Denied: true}, {Name: "b", Key: "kb"}}})
	h.Events = append(h.Events, event(10*sec, history.FaultStart, 1, "kill-owner", 2, true))
	r := Check(h, DefaultConfig())
	if len(r.State.Checks) != 1 || r.State.Checks[0].Limit != "a" {
		t.Fatalf("state checks %+v, want one, for limit a only", r.State.Checks)
	}
}

// A frozen owner that resumes with stale memory and grants a fresh burst
// fails the state check at the fault's end; the start of a freeze is not
// checked (nothing is lost when a node stops).
func TestStateSurvivalAfterFreeze(t *testing.T) {
	l := fast("tenant", 100*time.Millisecond, 20)
	freeze := func(h *history.History) *history.History {
		for i := range h.Events {
			h.Events[i].Fault, h.Events[i].Crash = "pause-owner", false
		}
		h.Events[0].Stale = true
		return h
	}
	r := Check(freeze(crash(l, 0)), DefaultConfig())
	mustPass(t, r)
	if len(r.State.Checks) != 1 || r.State.Checks[0].Edge != "end" {
		t.Fatalf("state checks %+v, want one at the end", r.State.Checks)
	}
	r = Check(freeze(crash(l, 14*sec)), DefaultConfig())
	mustFail(t, r, `(fault "pause-owner" end)`)
}

// A p99 over the ceiling fails the phase even when every call was answered
// within the caller's deadline.
func TestLatencyCeiling(t *testing.T) {
	l := fast("lim", 10*time.Millisecond, 100)
	h := newHistory(l)
	for i := range 1000 {
		lat := 2 * ms
		if i >= 10 && i%50 == 0 { // 2% of calls take 120ms, inside the 250ms deadline
			lat = 120 * ms
		}
		at := t0 + int64(i)*10*ms
		h.Ops = append(h.Ops, history.Op{ID: int64(i), Invoke: at, Complete: at + lat, Cost: 1,
			Limits: keys("lim", "k"), Outcome: history.Denied})
	}
	cfg := DefaultConfig()
	mustPass(t, Check(h, cfg))
	cfg.MaxP99 = 100 * time.Millisecond
	r := Check(h, cfg)
	mustFail(t, r, "latency in the healthy phase: p99 120ms of 1000 answered operations, ceiling 100ms")
	if p := r.Phase(PhaseHealthy); p.Pass || p.Availability != 1 {
		t.Fatalf("healthy phase %+v", p)
	}
}
