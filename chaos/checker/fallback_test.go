package checker

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/chaos/history"
)

// hotDefault is the hot limit, 100/s burst 10, with the default
// failure policy: a local fallback to the per-member share.
var hotDefault = history.LimitSpec{Name: "hot", Interval: 10 * time.Millisecond, Burst: 10, Consistency: "fast",
	OnFailure: "local", FallbackShare: true, Default: true, RatePer: time.Second}

// shareRun has three nodes decide one key exactly for 10s, except that from
// 5s on each node in fallBack cannot reach the owner and decides by its own
// GCRA with the given interval and burst (0 interval: admits everything).
// Every node sends a call every 2ms throughout.
func shareRun(fallBack map[int][2]int64, events ...history.Event) *history.History {
	h := newHistory(hotDefault)
	g := newGCRA(hotDefault.Interval, hotDefault.Burst)
	for node := range 3 {
		var fb func(int64) (history.Outcome, string)
		if p, ok := fallBack[node]; ok {
			lg := newGCRA(time.Duration(p[0]), p[1])
			fb = func(t int64) (history.Outcome, string) {
				if p[0] == 0 || lg.decide(t, 1) {
					return history.Allowed, "local"
				}
				return history.Denied, "local"
			}
		}
		stream{limits: keys("hot", "k"), from: int64(node) * 500_000, to: 10 * sec, every: 2 * ms, cost: 1,
			node: fmt.Sprintf("n%d", node+1),
			decide: func(t int64) (history.Outcome, string) {
				if t >= t0+5*sec && fb != nil {
					return fb(t)
				}
				return byGCRA(g, 1)(t)
			}}.add(h)
	}
	h.Events = append([]history.Event{
		event(5*sec, history.FaultStart, 1, "stalls", 1, false),
		event(10*sec, history.FaultEnd, 1, "stalls", 0, false),
	}, events...)
	h.Sort()
	return h
}

func TestCheck_defaultFallbackShare(t *testing.T) {
	share := [2]int64{int64(time.Second / 34), 4} // ceil(100/3)/s, ceil(10/3)
	// Every node falls back to its share of three members: within the
	// allowance, and the 5s window names one term per node.
	r := Check(shareRun(map[int][2]int64{0: share, 1: share, 2: share}), DefaultConfig())
	mustPass(t, r)
	w := r.Limits[0].WorstByWidth[1]
	if len(w.FallbackTerms) != 3 || w.FallbackTerms[0].Members != 3 || w.FallbackTerms[0].Burst != 4 {
		t.Fatalf("5s window terms %+v, want three nodes at N=3 with burst 4", w.FallbackTerms)
	}

	// One node admits everything by fallback: the violation names each
	// term, and only the node that fell back gets one.
	r = Check(shareRun(map[int][2]int64{0: {0, 0}}), DefaultConfig())
	mustFail(t, r, `limit "hot" key "k"`, "by fallback", "n1: 4 + 1s × 34/s (N=3) = 38]")
	for _, v := range r.Violations {
		if strings.Contains(v, "n2:") || strings.Contains(v, "n3:") {
			t.Fatalf("a node that did not fall back got a term: %s", v)
		}
	}

	// A node that counts itself alone falls back to the whole limit, and
	// the checker allows it: each reported count applies from its time on.
	full := [2]int64{int64(10 * time.Millisecond), 10}
	alone := history.Event{Time: t0 + 4*sec, Kind: history.Members, Nodes: []string{"n1"}, Members: 1}
	mustFail(t, Check(shareRun(map[int][2]int64{0: full}), DefaultConfig()), "n1: 4 + 1s × 34/s (N=3)")
	r = Check(shareRun(map[int][2]int64{0: full}, alone), DefaultConfig())
	mustPass(t, r)
	if w := r.Limits[0].WorstByWidth[0]; len(w.FallbackTerms) != 1 || w.FallbackTerms[0].Members != 1 {
		t.Fatalf("terms %+v, want n1 alone at N=1", w.FallbackTerms)
	}
	// A count reported after the window does not widen it.
	late := alone
	late.Time = t0 + 11*sec
	mustFail(t, Check(shareRun(map[int][2]int64{0: full}, late), DefaultConfig()), "(N=3)")
}

func TestCheck_openFallbackIsReportedNotJudged(t *testing.T) {
	open := hotDefault
	open.OnFailure, open.FallbackShare, open.Default = "open", false, false
	h := shareRun(map[int][2]int64{0: {0, 0}})
	h.Header.Limits = []history.LimitSpec{open}
	for i := range h.Ops {
		if h.Ops[i].FallbackMode != "" {
			h.Ops[i].FallbackMode = "open"
		}
	}
	r := Check(h, DefaultConfig())
	mustPass(t, r)
	if l := r.Limits[0]; l.FallbackAdmitted["open"] < 2000 || !l.Worst.FallbackUnbounded {
		t.Fatalf("open fallback admissions %v, worst %+v", l.FallbackAdmitted, l.Worst)
	}
}

func TestCheck_longestStretchWithoutNormalAnswer(t *testing.T) {
	share := [2]int64{int64(time.Second / 34), 4}
	r := Check(shareRun(map[int][2]int64{0: share, 1: share, 2: share}), DefaultConfig())
	// Normal answers stop at 5s, fallbacks run to the end of the run.
	if g := r.Gap; g.Key != "k" || g.Limit != "hot" || g.Length < 4990*time.Millisecond || g.Length > 5010*time.Millisecond || g.Ops < 7000 {
		t.Fatalf("gap %+v, want about 5s of key k", g)
	}
	// An exact run has none.
	if g := Check(exact(hotDefault, 3*sec), DefaultConfig()).Gap; g.Length != 0 {
		t.Fatalf("gap %+v in a run answered normally throughout", g)
	}
}

func TestKeyGap(t *testing.T) {
	ms := int64(time.Millisecond)
	ops := []keyOp{
		{0, 1 * ms, true},
		{10 * ms, 11 * ms, false}, // fallback: a run of one, 1ms
		{20 * ms, 21 * ms, true},
		{30 * ms, 31 * ms, false},  // a run of three: 30ms..300ms
		{40 * ms, 300 * ms, true},  // answered after the deadline: not normal
		{50 * ms, 51 * ms, false},  //
		{400 * ms, 401 * ms, true}, // normal again
	}
	g := keyGap(ops, 250*time.Millisecond)
	if g.Length != 270*time.Millisecond || g.Ops != 3 || g.Start != 30*ms {
		t.Fatalf("gap %+v, want 270ms from 30ms with 3 ops", g)
	}
	// A key asked twice, far apart, was idle in between, not starved.
	g = keyGap([]keyOp{{0, ms, false}, {5000 * ms, 5001 * ms, false}}, 250*time.Millisecond)
	if g.Length != time.Millisecond || g.Ops != 1 {
		t.Fatalf("gap %+v, want 1ms: a silence over a second ends a run", g)
	}
}

func TestCheck_callsToANodeThatLeftAreNotJudged(t *testing.T) {
	l := fast("lim", 100*time.Millisecond, 10)
	h := exact(l, 10*sec)
	for i := range 100 {
		at := t0 + 2*sec + int64(i)*50*ms // 2s to 7s
		h.Ops = append(h.Ops, history.Op{ID: int64(10000 + i), Node: "n2", Invoke: at, Complete: at + ms,
			Limits: keys("lim", ""), Cost: 1, Outcome: history.Error, Err: "connection refused"})
	}
	h.Sort()
	if r := Check(h, DefaultConfig()); r.OK() {
		t.Fatal("100 refused calls in the healthy phase passed")
	}
	h.Events = append(h.Events,
		history.Event{Time: t0 + 2*sec - ms, Kind: history.NodeLeft, Nodes: []string{"n2"}},
		history.Event{Time: t0 + 7*sec, Kind: history.NodeJoined, Nodes: []string{"n2"}})
	h.Sort()
	r := Check(h, DefaultConfig())
	mustPass(t, r)
	if st := r.Phase(PhaseHealthy); st.Drained != 100 || st.Errors != 0 {
		t.Fatalf("healthy phase %+v, want the 100 calls to the departed node drained", st)
	}
}

func TestCheck_callsToAStarvedNodeAreReportedNotJudged(t *testing.T) {
	l := fast("lim", 100*time.Millisecond, 10)
	h := exact(l, 10*sec)
	cfg := DefaultConfig()
	cfg.MinFaultAvailability = 0.999
	for i := range 100 {
		at := t0 + 2*sec + int64(i)*50*ms // 2s to 7s
		h.Ops = append(h.Ops, history.Op{ID: int64(10000 + i), Node: "n2", Invoke: at, Complete: at + 250*ms,
			Limits: keys("lim", ""), Cost: 1, Outcome: history.Timeout})
	}
	// A fault on n2 that is not Starved: its timeouts are judged.
	fault := func(starved bool) []history.Event {
		return []history.Event{
			{Time: t0 + 2*sec - ms, Kind: history.FaultStart, ID: 1, Fault: "slow", Nodes: []string{"n2"}, Starved: starved},
			{Time: t0 + 7*sec, Kind: history.FaultEnd, ID: 1, Fault: "slow", Nodes: []string{"n2"}},
		}
	}
	h.Events = fault(false)
	h.Sort()
	if r := Check(h, cfg); r.OK() {
		t.Fatal("100 timeouts at a throttled node passed without Starved")
	}
	// Starved: reported apart, and the other nodes' calls still judged.
	h.Events = fault(true)
	h.Sort()
	r := Check(h, cfg)
	mustPass(t, r)
	st := r.Phase(PhaseFault)
	if st.Starved != 100 || st.StarvedAnswered != 0 || st.Timeouts != 0 {
		t.Fatalf("fault phase %+v, want the 100 calls to the starved node reported apart", st)
	}
	if !strings.Contains(strings.Join(r.Notes, "\n"), "100 calls sent to nodes starved of CPU") {
		t.Errorf("notes do not report the starved calls: %q", r.Notes)
	}
	// A timeout at another node during the same fault still fails it.
	at := t0 + 3*sec
	h.Ops = append(h.Ops, history.Op{ID: 20000, Node: "n1", Invoke: at, Complete: at + 250*ms,
		Limits: keys("lim", ""), Cost: 1, Outcome: history.Timeout})
	h.Sort()
	if r := Check(h, cfg); r.OK() {
		t.Error("a timeout at a node the fault did not starve passed")
	}
}
