package redisbackend_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/redisbackend"
	"github.com/weirhq/weir/redisbackend/redistest"
)

// benchGroups spreads decisions over many groups, as real tenants would.
const benchGroups = 1024

// benchLimits admit nearly everything, so every decision also writes both
// TATs (the expensive path).
var benchLimits = []gcra.Limit{lim(1, 1_000_000), lim(2, 1_000_000)}

func benchKeys() [][]string {
	keys := make([][]string, benchGroups)
	for g := range keys {
		keys[g] = []string{fmt.Sprintf("rl:{bench%d}:tenant", g), fmt.Sprintf("rl:{bench%d}:user", g)}
	}
	return keys
}

// BenchmarkDecide measures one composite decision of two limits per round
// trip, on server TIME, from one goroutine.
func BenchmarkDecide(b *testing.B) {
	srv := redistest.Start(b)
	c, _ := newClient(b, srv, 4)
	be := newBackend(b, c, 5*time.Second) // generous: a benchmark, not a timeout test
	keys := benchKeys()
	ctx := b.Context()
	b.ReportAllocs()
	i := 0
	start := time.Now()
	for b.Loop() {
		if _, err := be.Decide(ctx, keys[i%benchGroups], benchLimits, 1, 0); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(i)/time.Since(start).Seconds(), "decisions/s")
}

// BenchmarkDecidePipelined measures batches of 64 composite decisions, one
// pipeline (one round trip) per batch, from one goroutine.
func BenchmarkDecidePipelined(b *testing.B) {
	const batch = 64
	srv := redistest.Start(b)
	c, _ := newClient(b, srv, 4)
	be := newBackend(b, c, 5*time.Second) // generous: a benchmark, not a timeout test
	keys := benchKeys()
	reqs := make([]redisbackend.DecideRequest, batch)
	ctx := b.Context()
	b.ReportAllocs()
	n := 0
	start := time.Now()
	for b.Loop() {
		for j := range reqs {
			reqs[j] = redisbackend.DecideRequest{Keys: keys[(n+j)%benchGroups], Limits: benchLimits, Cost: 1}
		}
		_, errs, err := be.DecidePipelined(ctx, reqs)
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range errs {
			if e != nil {
				b.Fatal(e)
			}
		}
		n += batch
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "decisions/s")
}

// BenchmarkStoreTATs measures write-behind flushes of 64 TATs in one
// pipeline: StoreTATs (a small script per key that never lowers a stored
// TAT) against plain pipelined SET … PX, which it replaced, in one run.
func BenchmarkStoreTATs(b *testing.B) {
	const batch = 64
	srv := redistest.Start(b)
	c, _ := newClient(b, srv, 4)
	be := newBackend(b, c, 5*time.Second)
	ctx := b.Context()
	now, err := be.Time(ctx)
	if err != nil {
		b.Fatal(err)
	}
	tats := make([]redisbackend.TAT, batch)
	for name, store := range map[string]func(n int) error{
		"script": func(n int) error {
			for j := range tats {
				tats[j] = redisbackend.TAT{Key: fmt.Sprintf("rl:{s%d}:k", (n+j)%benchGroups), TAT: now + int64(n+j), Now: now}
			}
			return be.StoreTATs(ctx, tats)
		},
		"set": func(n int) error {
			pipe := c.Pipeline()
			for j := range batch {
				pipe.Do(ctx, "SET", fmt.Sprintf("rl:{s%d}:k", (n+j)%benchGroups), now+int64(n+j), "PX", 60_000)
			}
			_, err := pipe.Exec(ctx)
			return err
		},
	} {
		b.Run(name, func(b *testing.B) {
			n := 0
			start := time.Now()
			for b.Loop() {
				if err := store(n); err != nil {
					b.Fatal(err)
				}
				n += batch
			}
			b.ReportMetric(float64(n)/time.Since(start).Seconds(), "tats/s")
		})
	}
}
