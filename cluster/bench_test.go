package cluster

import (
	"context"
	"testing"
	"time"
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
