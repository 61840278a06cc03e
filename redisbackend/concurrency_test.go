package redisbackend_test

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/redisbackend/redistest"
)

// TestBackend_Decide_concurrentBound hammers one composite limit set from
// many goroutines over a small pool, on server TIME, and checks the GCRA
// bound per limit: admitted cost <= B + elapsed/T, and no over-denial.
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
	for i, tl := range tallies {
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
	for i, l := range limits {
		bound := l.Burst + elapsed/l.Interval + 1
		if sum.admitted > bound {
			t.Errorf("limit %d over-admitted: %d > %d", i, sum.admitted, bound)
		}
		if float64(sum.admitted) < 0.9*float64(bound) {
			t.Errorf("limit %d over-denied: %d < 90%% of %d", i, sum.admitted, bound)
		}
	}
}
