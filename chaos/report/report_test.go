package report

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/chaos/checker"
	"github.com/weirhq/weir/chaos/history"
)

const (
	ms  = int64(time.Millisecond)
	sec = int64(time.Second)
	t0  = int64(1_700_000_000) * sec
)

// synthetic is a run of 20s: a key of "lim" (T 100ms, B 10) offered a
// call every 10ms and decided by an exact GCRA, a key of "other" decided
// likewise, and a partition [5s, 10s] during which "lim" falls back to a
// local limit on the node. extra adds that many admissions at 0.5s beyond
// what GCRA allowed, in the fullest window (19 of 20 units).
func synthetic(name string, extra int) *history.History {
	lim := history.LimitSpec{Name: "lim", Interval: 100 * time.Millisecond, Burst: 10, Consistency: "fast",
		OnFailure: "local", FallbackInterval: 500 * time.Millisecond, FallbackBurst: 2}
	other := history.LimitSpec{Name: "other", Interval: 200 * time.Millisecond, Burst: 5, Consistency: "strict", OnFailure: "closed"}
	h := &history.History{Header: history.Header{Scenario: name, Nodes: []string{"n1", "n2"},
		Limits: []history.LimitSpec{lim, other}, Deadline: 250 * time.Millisecond, Start: t0}}
	type state struct{ tat, t, b int64 }
	decide := func(g *state, now int64) bool {
		n := max(g.tat, now) + g.t
		if n-g.b*g.t > now {
			return false
		}
		g.tat = n
		return true
	}
	g := &state{t: int64(lim.Interval), b: lim.Burst}
	fb := &state{t: int64(lim.FallbackInterval), b: lim.FallbackBurst}
	o := &state{t: int64(other.Interval), b: other.Burst}
	id := int64(0)
	add := func(t int64, limit string, ok bool, mode string) {
		id++
		op := history.Op{ID: id, Node: "n1", Invoke: t, Complete: t + 2*ms, Cost: 1,
			Limits: []history.LimitKey{{Name: limit, Key: "hot"}}, Outcome: history.Denied, FallbackMode: mode}
		if ok {
			op.Outcome = history.Allowed
		}
		if mode != "" {
			op.FallbackReason = "owner_unreachable"
		}
		h.Ops = append(h.Ops, op)
	}
	for t := t0; t < t0+20*sec; t += 10 * ms {
		if t >= t0+5*sec && t < t0+10*sec {
			add(t, "lim", decide(fb, t), "local")
		} else {
			add(t, "lim", decide(g, t), "")
		}
		if (t-t0)%(30*ms) == 0 {
			add(t, "other", decide(o, t), "")
		}
	}
	for i := range extra {
		add(t0+500*ms+int64(i)*ms, "lim", true, "")
	}
	h.Events = []history.Event{
		{Time: t0 + 5*sec, Kind: history.FaultStart, ID: 1, Fault: "partition-node", Nodes: []string{"n1"}, Owners: 1},
		{Time: t0 + 10*sec, Kind: history.FaultEnd, ID: 1, Fault: "partition-node"},
	}
	h.Sort()
	return h
}

// checkTables fails if a Markdown table row has a different number of
// cells from its header.
func checkTables(t *testing.T, md string) {
	t.Helper()
	cells := func(line string) int {
		return strings.Count(line, "|") - strings.Count(line, `\|`)
	}
	want := 0
	for i, line := range strings.Split(md, "\n") {
		if !strings.HasPrefix(line, "|") {
			want = 0
			continue
		}
		if want == 0 {
			want = cells(line)
			continue
		}
		if got := cells(line); got != want {
			t.Errorf("line %d has %d separators, header %d: %s", i+1, got, want, line)
		}
	}
}

func TestMarkdown(t *testing.T) {
	good := checker.Check(synthetic("pass-scenario", 0), checker.DefaultConfig())
	bad := checker.Check(synthetic("fail|scenario", 3), checker.DefaultConfig())
	if !good.OK() || bad.OK() {
		t.Fatalf("synthetic results: good %v %q, bad %v", good.OK(), good.Violations, bad.OK())
	}
	var b bytes.Buffer
	if err := Markdown(&b, []checker.Result{good, bad}); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	t.Log("\n" + md)
	checkTables(t, md)

	row := func(prefix string) string {
		for _, line := range strings.Split(md, "\n") {
			if strings.HasPrefix(line, prefix) {
				return line
			}
		}
		t.Fatalf("no row starting with %q", prefix)
		return ""
	}
	gw, _ := good.Worst()
	for _, want := range []string{
		"| pass-scenario | " + strconv.Itoa(good.Ops) + " | ",
		" | " + strconv.Itoa(int(gw.Worst.Admitted+gw.Worst.Fallback)) + " / 20 (1s, lim) | ",
		" | local ",
		"(adm ",
		" | 100.00% / 100.00% / 100.00% | ",
		" | 4.99s (lim hot) | **PASS** |",
	} {
		if r := row("| pass-scenario |"); !strings.Contains(r, want) {
			t.Errorf("pass row %q lacks %q", r, want)
		}
	}
	for _, want := range []string{
		" | 22 / 20 (1s, lim) | +2 | ",
		" | **FAIL** |",
	} {
		if r := row(`| fail\|scenario |`); !strings.Contains(r, want) {
			t.Errorf("fail row %q lacks %q", r, want)
		}
	}
	for _, want := range []string{
		"1 of 2 scenarios passed.",
		"## pass-scenario: **PASS**",
		"- partition-node on n1: 5.0s to 10.0s",
		"| lim | 100ms / 10 | fast | local (500ms, burst 2 per node) |",
		"No violations.",
		"State survival: no crash or freeze, nothing to check.",
		"## fail|scenario: **FAIL**",
		"Violations:\n\n- limit \"lim\" key \"hot\": 22 units admitted in window [0.000s, +1s], allowance 20 (bound 20)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func TestMarkdownStateAndEmpty(t *testing.T) {
	h := synthetic("crash", 0)
	h.Events[0].Crash = true
	r := checker.Check(h, checker.DefaultConfig())
	empty := checker.Check(&history.History{Header: history.Header{Scenario: "empty",
		Limits: []history.LimitSpec{{Name: "x", Interval: time.Second, Burst: 1}}}}, checker.DefaultConfig())
	var b bytes.Buffer
	if err := Markdown(&b, []checker.Result{r, empty}); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	checkTables(t, md)
	for _, want := range []string{
		// lim is saturated before the crash but only falls back after it
		// (fallback admissions are not counted); other keeps its rate at
		// both edges: 3s/200ms + 0.5 × 5 + ceil(50ms/200ms) + 1.
		"State survival: 3 checks, 0 failed.",
		"| lim | hot | partition-node | start | 5.0s | 0 / 37 in 3s | **PASS** |",
		"| other | hot | partition-node | end | 10.0s | 15 / 19.50 in 3s | **PASS** |",
		"| empty | 0 | - | - | - | - / - / - | - / - / - | - | **PASS** |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}

func TestPlot(t *testing.T) {
	h := synthetic("plot", 3)
	r := checker.Check(h, checker.DefaultConfig())
	path := filepath.Join(t.TempDir(), "plot.png")
	if err := Plot(path, h, r); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	bb := img.Bounds()
	if bb.Dx() < 500 || bb.Dy() < 200 || bb.Dx() <= bb.Dy() {
		t.Fatalf("image is %dx%d", bb.Dx(), bb.Dy())
	}
	// The fault is shaded light red.
	shaded := 0
	for y := bb.Min.Y; y < bb.Max.Y; y += 2 {
		for x := bb.Min.X; x < bb.Max.X; x += 2 {
			r, g, b, _ := img.At(x, y).RGBA()
			r, g, b = r>>8, g>>8, b>>8
			if r == 255 && g > 190 && g < 245 && b == g {
				shaded++
			}
		}
	}
	if shaded < 1000 {
		t.Errorf("only %d light red pixels: the fault is not shaded", shaded)
	}

	// A run with no operations still plots.
	empty := &history.History{Header: history.Header{Scenario: "empty",
		Limits: []history.LimitSpec{{Name: "x", Interval: time.Second, Burst: 1}}}}
	if err := Plot(filepath.Join(t.TempDir(), "empty.png"), empty, checker.Check(empty, checker.DefaultConfig())); err != nil {
		t.Fatal(err)
	}
}

// TestMarkdown_leaseTable: a run whose limit is leasable gets a row in the
// leasable-limits table (admitted against the bound per width, the share
// from leases, the hit ratio, stranded, expired and still-held units) and
// its counters
// in full in its section; a run without counters shows n/a; a report
// without leasable limits has no such table.
func TestMarkdown_leaseTable(t *testing.T) {
	leased := func(name string, counts *history.LeaseCounts) checker.Result {
		h := synthetic(name, 0)
		h.Header.Limits[0].LeaseMax, h.Header.Limits[0].LeaseTTL = 5, 250*time.Millisecond
		if counts != nil {
			h.Events = append(h.Events, history.Event{Time: t0 + 20*sec, Kind: history.Leases, Detail: "read at the end",
				Leases: map[string]history.LeaseCounts{"lim": *counts}})
			h.Sort()
		}
		return checker.Check(h, checker.DefaultConfig())
	}
	counts := history.LeaseCounts{Granted: 50, Credited: 10, Expired: 6, Received: 48, Spent: 30, Returned: 10, Stranded: 4, Lost: 2,
		SpentDecisions: 30, RefusedDecisions: 50, ForwardedDecisions: 20}
	with, without := leased("leased", &counts), leased("unread", nil)
	var b bytes.Buffer
	if err := Markdown(&b, []checker.Result{with, without}); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	checkTables(t, md)
	lw := with.Limits[0]
	share := 100 * float64(30) / float64(lw.Admitted)
	for _, want := range []string{
		"Leasable limits (held to B + W/T like every other limit",
		"| leased | lim | " + strconv.Itoa(int(lw.Admitted)) + " | 1s " + strconv.Itoa(int(lw.WorstByWidth[0].Admitted+lw.WorstByWidth[0].Fallback)) + "/20, 5s ",
		" | 30 (" + strconv.Itoa(int(share+0.5)) + "%) | 80% | 6 | 6 | 4 | 50 / 10 |",
		"| unread | lim | ",
		" | n/a | n/a | n/a | n/a | n/a | n/a |",
		"Leases of lim: at owners granted 50, credited 10, expired 6; at peers received 48, spent 30, returned 10, stranded 4, lost 2; decisions at peers 30 spent, 50 refused, 20 forwarded (read at the end).",
		"Leases of lim: no lease counters were recorded",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}

	b.Reset()
	if err := Markdown(&b, []checker.Result{checker.Check(synthetic("plain", 0), checker.DefaultConfig())}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "Leasable limits") || strings.Contains(b.String(), "Leases of") {
		t.Errorf("a report without leasable limits mentions leases:\n%s", b.String())
	}
}
