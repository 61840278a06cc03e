package forward

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/limiter"
)

// flood sends n requests for kv through node at once, at one instant
// of the fake clock, and returns their decisions.
func (lc *leaseCluster) flood(node string, kv map[string]string, n int) []limiter.Decision {
	lc.t.Helper()
	out := make([]limiter.Decision, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			out[i], errs[i] = lc.nodes[node].lim.Decide(ctx, limiter.Request{Descriptors: kv, Cost: 1})
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			lc.t.Fatal(err)
		}
	}
	return out
}

// saturate exhausts kv's key at its owner and has peer p learn it (a
// forwarded denial) and see demand (requests refused locally), then moves
// the clock to when one unit fits again.
func (lc *leaseCluster) saturate(owner, p string, kv map[string]string) {
	lc.t.Helper()
	for lc.decide(owner, kv).Allowed {
	}
	d := lc.decide(p, kv) // forwarded; the owner denies
	if d.Allowed || d.FromLease {
		lc.t.Fatalf("forwarded to the owner of an exhausted key: %+v", d)
	}
	sent := lc.net.Sent(p, owner)
	for range 20 { // demand enough for a lease
		if d = lc.decide(p, kv); d.Allowed || d.RetryAfter <= 0 || !d.FromLease {
			lc.t.Fatalf("not refused locally: %+v", d)
		}
	}
	if hops := lc.net.Sent(p, owner) - sent; hops != 0 {
		lc.t.Fatalf("%d hops while the owner's denial held", hops)
	}
	lc.clock.Add(d.RetryAfter) // the owner's denial has passed
}

// A flood of concurrent requests on a saturated key at a peer, once the
// owner's last denial has passed, costs one RPC (a probe refresh that all
// of them wait for), not a hop each. The probe's answer is a scheduled
// grant: the unit that had refilled is admitted at once, no more, and the
// others are refused until the next unit's time, exactly one interval
// later; the peer then admits one unit per interval from the schedule
// without another hop and refuses in between, while the owner, which
// charged the schedule to the key, refuses its own callers until the
// schedule's end.
func TestLeases_saturatedFloodCostsOneProbe(t *testing.T) {
	lc := newLeaseCluster(t, 2, false)
	owner, peers := lc.ownerAndPeers("t1")
	p := peers[0]
	lc.saturate(owner, p, hotKV)
	// Slow the link so that the flood piles up behind the first hop.
	lc.net.Delay(p, owner, 20*time.Millisecond)
	sent := lc.net.Sent(p, owner)
	ds := lc.flood(p, hotKV, 50)
	if hops := lc.net.Sent(p, owner) - sent; hops != 1 {
		t.Fatalf("%d hops for a flood of 50 on a saturated key, want 1 (one probe)", hops)
	}
	const interval = time.Millisecond // hot: 100 per 100ms
	var admitted int
	for _, d := range ds {
		switch {
		case d.Fallback != nil || !d.FromLease:
			t.Fatalf("not decided from the probe's answer: %+v", d)
		case d.Allowed:
			admitted++
		case d.RetryAfter != interval:
			t.Fatalf("refused with retry-after %s, want the next unit's time, %s", d.RetryAfter, interval)
		}
	}
	if admitted != 1 {
		t.Fatalf("admitted %d, want the 1 unit that had refilled", admitted)
	}
	held := lc.units(p, hotKV)
	if held < 2 {
		t.Fatalf("the probe's grant left %d units for later, want a schedule", held)
	}
	lc.net.HealAll()
	if d := lc.decide(owner, hotKV); d.Allowed || d.RetryAfter < time.Duration(held)*interval {
		t.Fatalf("owner at the same instant: %+v; want refused until the peer's %d scheduled units are due", d, held)
	}
	sent = lc.net.Sent(p, owner)
	for i := range held {
		if d := lc.decide(p, hotKV); d.Allowed || d.RetryAfter <= 0 || !d.FromLease {
			t.Fatalf("unit %d spent before its time: %+v", i, d)
		}
		lc.clock.Add(interval)
		if d := lc.decide(p, hotKV); !d.Allowed || !d.FromLease {
			t.Fatalf("unit %d not spendable at its time: %+v", i, d)
		}
	}
	if hops := lc.net.Sent(p, owner) - sent; hops != 0 {
		t.Fatalf("%d hops while the schedule lasted", hops)
	}
	if got := lc.metric(p, "weir_lease_rpcs_total", "result", "ok"); got != 1 {
		t.Fatalf("lease RPCs %v, want 1", got)
	}
	if got := lc.metric(p, "weir_lease_waits_total", "limit", "hot"); got < 1 || got > 50 {
		t.Fatalf("waits %v, want 1..50", got)
	}
}

// Waiting for a probe never outlasts the caller's deadline: with the owner
// cut off, a request on a saturated key waits for at most two probes and
// then falls back, within its deadline (the limiter would answer an error
// past it). The deadline is generous so that only a hang, not a loaded
// machine's scheduling, can fail this.
func TestLeases_saturatedProbeWaitKeepsTheDeadline(t *testing.T) {
	lc := newLeaseCluster(t, 2, false)
	owner, peers := lc.ownerAndPeers("t1")
	p := peers[0]
	lc.saturate(owner, p, hotKV)
	lc.net.Partition([]string{p}, []string{owner})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, err := lc.nodes[p].lim.Decide(ctx, limiter.Request{Descriptors: hotKV, Cost: 1})
	if err != nil {
		t.Fatal(err)
	}
	if d.Fallback == nil || d.FromLease {
		t.Fatalf("decided without the owner and without falling back: %+v", d)
	}
	if got := lc.metric(p, "weir_lease_rpcs_total", "result", "error"); got < 1 || got > 2 {
		t.Fatalf("%v failed probes, want 1 or 2 before forwarding", got)
	}
	if err := lc.nodes[p].leases.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// benchSaturatedPolicy is the lead's hot-key workload (issue 24): one key
// at 1000/s, burst 100, leased 10 units at a time.
const benchSaturatedPolicy = `
version: lease-saturated
limits:
  - {name: hot, match: [tenant], rate: 1000/s, burst: 100, lease: {max: 10, ttl: 250ms}}
`

// benchSaturated decides hotKV at the owner or at the peer from 32
// goroutines (SetParallelism(16) on two cores, as weir bench's workers)
// while the fake clock follows the real one in 100µs steps, so that the
// key frees one unit per real millisecond and stays saturated. Peer RPCs
// cross a real 100µs delay each way. It reports the peer's lease RPCs and
// waits per decision, and the admitted units against the bound B + W/T.
func benchSaturated(b *testing.B, atOwner bool) {
	lc := newLeaseClusterOf(b, 2, false, benchSaturatedPolicy)
	owner, peers := lc.ownerAndPeers("t1")
	p := peers[0]
	lc.net.Delay(p, owner, 100*time.Microsecond)
	lc.net.Delay(owner, p, 100*time.Microsecond)
	lim := lc.nodes[p].lim
	if atOwner {
		lim = lc.nodes[owner].lim
	}
	req := limiter.Request{Descriptors: hotKV, Cost: 1}
	var allowed atomic.Int64
	start := lc.clock.Now()
	stop, ticked := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ticked)
		t := time.NewTicker(100 * time.Microsecond)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				lc.clock.Add(now.Sub(last))
				last = now
			}
		}
	}()
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			// A deadline, as every gRPC caller has: without one a
			// request has no budget to wait for a probe and forwards.
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			d, err := lim.Decide(ctx, req)
			cancel()
			if err != nil {
				b.Error(err)
			}
			if d.Allowed {
				allowed.Add(1)
			}
		}
	})
	b.StopTimer()
	close(stop)
	<-ticked
	w := lc.clock.Now().Sub(start)
	bound := 100 + int64(w/time.Millisecond)
	if allowed.Load() > bound {
		b.Fatalf("admitted %d over %s, bound %d", allowed.Load(), w, bound)
	}
	b.ReportMetric(float64(allowed.Load())/float64(bound), "admitted/bound")
	b.ReportMetric(lc.metric(p, "weir_lease_rpcs_total", "result", "ok")/float64(b.N), "rpcs/op")
	b.ReportMetric(lc.metric(p, "weir_lease_waits_total", "limit", "hot")/float64(b.N), "waits/op")
}

// BenchmarkLeases_saturated compares a saturated leasable key decided at
// its owner with the same key decided at a peer (issue 24: the peer
// within 0.85× the owner).
func BenchmarkLeases_saturated(b *testing.B) {
	b.Run("owner", func(b *testing.B) { benchSaturated(b, true) })
	b.Run("peer", func(b *testing.B) { benchSaturated(b, false) })
}
