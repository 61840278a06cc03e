package client_test

import (
	"context"
	"testing"
	"time"
)

// benchLeased decides one hot leasable key in process from b.RunParallel's
// goroutines and reports decisions per second and RPCs per decision (Hold
// requests and Decide RPCs together).
func benchLeased(b *testing.B, pol string) {
	_, _, c := leaseClient(b, pol)
	desc := map[string]string{"tenant": "hot"}
	warm(b, c, desc)
	ctx := context.Background()
	before := c.LeaseStats()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Decide(ctx, desc, 1); err != nil {
				b.Error(err)
				return
			}
		}
	})
	elapsed := time.Since(start)
	b.StopTimer()
	after := c.LeaseStats()
	rpcs := (after.DecideRPCs - before.DecideRPCs) + (after.LeaseRPCs - before.LeaseRPCs)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
	b.ReportMetric(float64(rpcs)/float64(b.N), "rpcs/decision")
	b.ReportMetric(float64(after.FromLease-before.FromLease)/float64(b.N), "from_lease/decision")
}

// BenchmarkClient_Decide_leasedHotKey: a key whose limit (1,000,000/s)
// the benchmark's demand roughly meets: grants of up to a quarter second
// of demand, refreshed about every 150ms.
func BenchmarkClient_Decide_leasedHotKey(b *testing.B) {
	benchLeased(b, `version: bench
limits:
  - {name: hot, match: [tenant], rate: 1000000/s, burst: 1000000, lease: {max: 1000000, ttl: 250ms}}
`)
}

// BenchmarkClient_Decide_leasedSaturatedKey: a 1000/s key under far more
// demand: nearly every decision is a local refusal from the owner's last
// answer, with about one probe per unit interval.
func BenchmarkClient_Decide_leasedSaturatedKey(b *testing.B) {
	benchLeased(b, `version: bench
limits:
  - {name: hot, match: [tenant], rate: 1000/s, burst: 2000, lease: {max: 500, ttl: 250ms}}
`)
}
