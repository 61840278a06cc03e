package checker

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/weirhq/weir/chaos/history"
)

// FallbackTerm is what one node's local fallback adds to a window's
// allowance: its fallback burst plus the window's width at its fallback
// rate. A node adds its term only to windows in which it admitted by
// fallback.
type FallbackTerm struct {
	Node string
	// Members is the member count the node's share was derived from (the
	// fewest it reported during the window; 0 for an explicit fallback
	// limit, which does not depend on it).
	Members  int
	Burst    int64
	Interval time.Duration
	Width    time.Duration
	// Admitted is what the node admitted by fallback in the window.
	Admitted int64
	Units    float64
}

// String renders the term as "n1: 4 + 5s × 34/s (N=3) = 174".
func (t FallbackTerm) String() string {
	n := ""
	if t.Members > 0 {
		n = fmt.Sprintf(" (N=%d)", t.Members)
	}
	rate := "0"
	if t.Interval > 0 {
		rate = Units(float64(time.Second) / float64(t.Interval))
	}
	return fmt.Sprintf("%s: %d + %s × %s/s%s = %s", t.Node, t.Burst, t.Width, rate, n, Units(t.Units))
}

// describeTerms renders terms for a violation or a report cell.
func describeTerms(terms []FallbackTerm) string {
	parts := make([]string, len(terms))
	for i, t := range terms {
		parts[i] = t.String()
	}
	return strings.Join(parts, "; ")
}

// membership is each node's member count over time, from Members events.
type membership struct {
	// byNode holds each node's changes sorted by time.
	byNode   map[string][]memberChange
	fallback int // the count assumed before a node's first report
}

type memberChange struct {
	at      int64
	members int
}

func newMembership(events []history.Event, nodes int) membership {
	m := membership{byNode: map[string][]memberChange{}, fallback: max(nodes, 1)}
	for _, e := range events {
		if e.Kind != history.Members || len(e.Nodes) != 1 || e.Members <= 0 {
			continue
		}
		m.byNode[e.Nodes[0]] = append(m.byNode[e.Nodes[0]], memberChange{at: e.Time, members: e.Members})
	}
	for _, ch := range m.byNode {
		sort.SliceStable(ch, func(i, j int) bool { return ch[i].at < ch[j].at })
	}
	return m
}

// fewest is the smallest member count node reported as holding at any time
// in [s, e]: the count in force at s, and every change up to e. The fewer
// members a node counts, the larger its share, so this is the most it may
// have fallen back to.
func (m membership) fewest(node string, s, e int64) int {
	ch := m.byNode[node]
	i := sort.Search(len(ch), func(i int) bool { return ch[i].at > s })
	n := m.fallback
	if i > 0 {
		n = ch[i-1].members
	}
	for ; i < len(ch) && ch[i].at <= e; i++ {
		n = min(n, ch[i].members)
	}
	return n
}

// fallbackTerms returns the term of every node that admitted by fallback in
// the window [s, s+w] (perNode is indexed like c.nodes) and their sum.
func (c *checker) fallbackTerms(ls *limitState, perNode []int64, s int64, w time.Duration) ([]FallbackTerm, float64) {
	var terms []FallbackTerm
	var sum float64
	for i, adm := range perNode {
		if adm == 0 {
			continue
		}
		t := FallbackTerm{Node: c.nodes[i], Admitted: adm, Width: w}
		if ls.spec.FallbackShare {
			t.Members = c.members.fewest(t.Node, s, s+int64(w))
		}
		t.Interval, t.Burst = ls.spec.FallbackParams(max(t.Members, 1))
		t.Units = ls.spec.FallbackBoundFor(w, max(t.Members, 1))
		terms = append(terms, t)
		sum += t.Units
	}
	return terms, sum
}

// nodeIndex numbers the nodes operations were sent to, header nodes first.
func (c *checker) nodeIndex(node string) int {
	if i, ok := c.nodeIdx[node]; ok {
		return i
	}
	c.nodeIdx[node] = len(c.nodes)
	c.nodes = append(c.nodes, node)
	return len(c.nodes) - 1
}

// Gap is the longest stretch in which one key, asked again and again, got
// no normal (non-fallback, in-time) answer: a run of its operations that
// were all answered otherwise (by a failure policy, or late), with no
// normal answer among them and no silence longer than gapSilence between
// them, from the first one's invoke to the last one's complete.
type Gap struct {
	Limit, Key string
	Start      int64 // Unix nanoseconds
	Length     time.Duration
	// Ops is how many operations the run holds.
	Ops int
}

// gapSilence ends a run: a key not asked for this long was not kept
// waiting, it was idle (a cold key asked twice in a fault is not a key
// starved of normal answers for the whole fault).
const gapSilence = time.Second

// keyGap finds the longest run (see Gap) in ops, sorted by invoke.
func keyGap(ops []keyOp, deadline time.Duration) (g Gap) {
	var cur Gap
	var last int64 // complete of the run's latest op
	end := func() {
		if cur.Ops > 0 && cur.Length > g.Length {
			g = cur
		}
		cur = Gap{}
	}
	for _, o := range ops {
		normal := o.normal && (deadline <= 0 || o.comp-o.inv <= int64(deadline))
		if normal || (cur.Ops > 0 && o.inv-last > int64(gapSilence)) {
			end()
		}
		if normal {
			continue
		}
		if cur.Ops == 0 {
			cur.Start, last = o.inv, o.comp
		}
		cur.Ops++
		last = max(last, o.comp)
		cur.Length = time.Duration(last - cur.Start)
	}
	end()
	return g
}

// keyOp is one operation of a key, for the gap search.
type keyOp struct {
	inv, comp int64
	normal    bool // answered without a failure policy
}
