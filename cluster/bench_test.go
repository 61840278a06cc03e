package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/limiter"
)

// BenchmarkCluster_DecideBatch_forwarded decides batches of 100 requests
// on node-0 of three in-process nodes (no Redis), every request owned by
// another node across a link delayed by 1ms each way: the cost of a batch
// is the number of round trips it waits for.
func BenchmarkCluster_DecideBatch_forwarded(b *testing.B) {
	tc := newTestCluster(b, 3, false)
	for _, to := range []string{"node-1", "node-2"} {
		tc.net.Delay("node-0", to, time.Millisecond)
	}
	tenants, _ := tc.remoteTenants("node-0", 100)
	rs := batchOf(tenants)
	lim := tc.nodes["node-0"].lim
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := lim.DecideBatch(ctx, rs); err != nil {
			b.Fatal(err)
		}
		tc.clock.Add(time.Second) // keep every request admitted
	}
}

// BenchmarkCluster_Decide_owner is one decision end to end below the
// transport: limiter (policy resolution, metrics) -> cluster (ownership)
// -> memory, on the node that owns the group, no Redis; the built-in
// two-limit composite over 1,000 tenants. Its allocs/op are the core's
// share of a gRPC decision's.
func BenchmarkCluster_Decide_owner(b *testing.B) {
	tc := newTestCluster(b, 1, false)
	lim := tc.nodes["node-0"].lim
	reqs := make([]limiter.Request, 1000)
	for i := range reqs {
		reqs[i] = limiter.Request{Descriptors: map[string]string{"tenant": fmt.Sprint("t", i), "user": "u1"}, Cost: 1}
	}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := lim.Decide(ctx, reqs[i%len(reqs)]); err != nil {
			b.Fatal(err)
		}
		if i++; i%len(reqs) == 0 {
			tc.clock.Add(time.Second)
		}
	}
}
