package redisbackend_test

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/redisbackend/redistest"
)

// TestBackend_Decide_concurrentBound hammers one composite limit set from
// many goroutines over a small pool, on server TIME, and checks the GCRA
// bound per limit: admitted cost <= B + elapsed/T, and no over-denial.
//
// Over-denial is judged against what each limit could have admitted: while
// its bucket sits full and no decision runs (the test or Redis descheduled
// on a loaded machine), what would refill is wasted, as GCRA must waste it.
func TestBackend_Decide_concurrentBound(t *testing.T) {
	const workers = 16
	run := 3 * time.Second
	if testing.Short() {
		run = time.Second
	}
	srv := redistest.Start(t)
	c, _ := newClient(t, srv, 6)
	b := newBackend(t, c, time.Second)
	keys := []string{"rl:{hammer}:tenant", "rl:{hammer}:user"}
	// Same rate, different bursts: both limits bind, so each limit's bound
	// is reachable and over-denial on either would show.
	limits := []gcra.Limit{lim(1000*us, 20), lim(1000*us, 5)}

	type tally struct {
		admitted, denied, errs int64
		first, last            int64
		seen                   []seen
	}
	tallies := make([]tally, workers)
	deadline := time.Now().Add(run)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			tl := &tallies[w]
			for time.Now().Before(deadline) {
				cost := 1 + rng.Int64N(3)
				d, err := b.Decide(t.Context(), keys, limits, cost, 0)
				if err != nil {
					tl.errs++
					continue
				}
				if tl.first == 0 || d.Now < tl.first {
					tl.first = d.Now
				}
				tl.last = max(tl.last, d.Now)
				tl.seen = append(tl.seen, seen{now: d.Now, tats: []int64{d.Results[0].TAT, d.Results[1].TAT}})
				if d.Overall.Allowed {
					tl.admitted += cost
				} else {
					tl.denied++
				}
			}
		})
	}
	wg.Wait()

	var sum tally
	var all []seen
	for i, tl := range tallies {
		all = append(all, tl.seen...)
		sum.admitted += tl.admitted
		sum.denied += tl.denied
		sum.errs += tl.errs
		if i == 0 || tl.first < sum.first {
			sum.first = tl.first
		}
		sum.last = max(sum.last, tl.last)
	}
	if sum.errs > 0 {
		t.Fatalf("%d errors", sum.errs)
	}
	elapsed := sum.last - sum.first
	t.Logf("admitted cost %d, denied %d, over %dns of server time", sum.admitted, sum.denied, elapsed)
	if sum.denied == 0 {
		t.Fatal("no denials: the load did not saturate the limits")
	}
	idle := fullAndIdle(all, len(limits))
	t.Logf("of which each limit's bucket sat full with no decision running for %v", idle)
	for i, l := range limits {
		bound := l.Burst + elapsed/l.Interval + 1
		if sum.admitted > bound {
			t.Errorf("limit %d over-admitted: %d > %d", i, sum.admitted, bound)
		}
		if could := bound - idle[i]/l.Interval; float64(sum.admitted) < 0.9*float64(could) {
			t.Errorf("limit %d over-denied: %d < 90%% of %d (%d less the units wasted in %d full and idle)", i, sum.admitted, could, bound, idle[i])
		}
	}
}

// seen is one decision: the server time it ran at and each key's TAT after it.
type seen struct {
	now  int64
	tats []int64
}

// fullAndIdle returns, per limit, the server time its bucket sat full (TAT
// at or before now) with no decision running. Scripts run one at a time on
// a non-decreasing TIME and never lower a TAT, so after sorting by now, the
// running maximum TAT is the key's state between two decisions.
func fullAndIdle(all []seen, limits int) []int64 {
	slices.SortFunc(all, func(a, b seen) int { return cmp.Compare(a.now, b.now) })
	tat := make([]int64, limits)
	idle := make([]int64, limits)
	for i := 0; i+1 < len(all); i++ {
		for l := range tat {
			tat[l] = max(tat[l], all[i].tats[l])
			if fullFrom := max(all[i].now, tat[l]); all[i+1].now > fullFrom {
				idle[l] += all[i+1].now - fullFrom
			}
		}
	}
	return idle
}
