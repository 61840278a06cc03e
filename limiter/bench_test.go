package limiter

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkLimiter_DecideBatch_memory decides batches of 100 two-limit
// requests over 100 tenants in memory (the embedded node's path).
func BenchmarkLimiter_DecideBatch_memory(b *testing.B) {
	f := newFixture(b, testPolicy)
	rs := make([]Request, 100)
	for i := range rs {
		rs[i] = Request{Descriptors: desc("tenant", fmt.Sprint("t", i), "user", "u"), Cost: 1}
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.lim.DecideBatch(ctx, rs); err != nil {
			b.Fatal(err)
		}
		f.clock.Add(time.Second)
	}
}
