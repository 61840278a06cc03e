package checker

import "sort"

// span is one admitted operation of a key.
type span struct {
	inv, comp int64
	cost      int64
	fb        bool
	node      int32 // index of the node the call went to (checker.nodes)
}

// keySpans is a key's admitted operations sorted by invoke time, with their
// order by complete time alongside.
type keySpans struct {
	sp     []span
	byComp []int32
}

func newKeySpans(sp []span) *keySpans {
	sort.SliceStable(sp, func(i, j int) bool { return sp[i].inv < sp[j].inv })
	byComp := make([]int32, len(sp))
	for i := range byComp {
		byComp[i] = int32(i)
	}
	sort.SliceStable(byComp, func(i, j int) bool { return sp[byComp[i]].comp < sp[byComp[j]].comp })
	return &keySpans{sp: sp, byComp: byComp}
}

// Span states in a sweep.
const (
	pending uint8 = iota // not yet complete by the window's end
	counted              // inside the current window
	gone                 // invoked before the window's start
)

// sweeper keeps the admitted cost of the operations lying entirely inside a
// window [lo, hi] that only moves forward: an operation is counted once
// its Complete <= hi, and dropped for good once its Invoke < lo. Each
// operation enters and leaves at most once, so a whole sweep is linear.
type sweeper struct {
	ks     *keySpans
	state  []uint8
	gi, ci int
	// nonfb and fb are the counted non-fallback and fallback cost, fbNode
	// the fallback cost per node index.
	nonfb, fb int64
	fbNode    []int64
}

// newSweeper sweeps ks, reusing buf; nodes is how many node indexes spans
// may carry.
func newSweeper(ks *keySpans, buf []uint8, nodes int) *sweeper {
	if cap(buf) < len(ks.sp) {
		buf = make([]uint8, len(ks.sp))
	}
	buf = buf[:len(ks.sp)]
	clear(buf)
	return &sweeper{ks: ks, state: buf, fbNode: make([]int64, nodes)}
}

// advance moves the window to [lo, hi]; lo and hi must not decrease.
func (w *sweeper) advance(lo, hi int64) {
	sp := w.ks.sp
	for w.gi < len(sp) && sp[w.gi].inv < lo {
		if w.state[w.gi] == counted {
			w.sub(sp[w.gi])
		}
		w.state[w.gi] = gone
		w.gi++
	}
	for w.ci < len(sp) {
		j := w.ks.byComp[w.ci]
		if sp[j].comp > hi {
			break
		}
		if w.state[j] == pending {
			w.state[j] = counted
			w.add(sp[j])
		}
		w.ci++
	}
}

func (w *sweeper) add(s span) {
	if s.fb {
		w.fb += s.cost
		w.fbNode[s.node] += s.cost
	} else {
		w.nonfb += s.cost
	}
}

func (w *sweeper) sub(s span) {
	if s.fb {
		w.fb -= s.cost
		w.fbNode[s.node] -= s.cost
	} else {
		w.nonfb -= s.cost
	}
}

// costInside sums the cost of the operations lying entirely inside [lo, hi]
// by a binary search and a scan; for the few one-off windows of the
// state-survival check.
func (ks *keySpans) costInside(lo, hi int64, fallback bool) int64 {
	sp := ks.sp
	i := sort.Search(len(sp), func(i int) bool { return sp[i].inv >= lo })
	var n int64
	for ; i < len(sp) && sp[i].inv <= hi; i++ {
		if sp[i].comp <= hi && sp[i].fb == fallback {
			n += sp[i].cost
		}
	}
	return n
}
