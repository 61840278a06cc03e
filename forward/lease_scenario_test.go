package forward

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/weirhq/weir/leaselink"
)

var hotKV = map[string]string{"tenant": "t1"}

// A peer with demand is granted a lease at its tick and then decides the
// hot key without a hop; at its next refresh it returns what it did not
// spend, and the owner credits it back.
func TestLeases_grantSpendRefreshReturn(t *testing.T) {
	lc := newLeaseCluster(t, 3, false)
	owner, peers := lc.ownerAndPeers("t1")
	p := peers[0]
	warmed := lc.warm(p, hotKV)
	held := lc.units(p, hotKV)
	// The request that got the first lease (through a probe) may have paid from it.
	spentBefore := lc.metric(p, "weir_lease_decisions_total", "limit", "hot", "outcome", "spent")
	if held < 1 || held > 20 {
		t.Fatalf("after %d requests %s holds %d units, want 1..20 (lease max)", warmed, p, held)
	}
	sent := lc.net.Sent(p, owner)
	for range held {
		if d := lc.decide(p, hotKV); !d.Allowed {
			t.Fatalf("a request paid from the lease was denied: %+v", d)
		}
	}
	if got := lc.net.Sent(p, owner); got != sent {
		t.Fatalf("%d messages to the owner while spending a lease, want 0", got-sent)
	}
	if lc.units(p, hotKV) != 0 {
		t.Fatalf("%d units left after spending all", lc.units(p, hotKV))
	}
	// Used up with demand left: the next tick refreshes (nothing to return).
	lc.tick()
	again := lc.units(p, hotKV)
	if again < 1 {
		t.Fatal("no new lease after the first was used up")
	}
	lc.decide(p, hotKV) // spend one, then refresh early: the rest returns
	lc.clock.Add(200 * time.Millisecond)
	lc.tick()
	if got := lc.metric(p, "weir_lease_units_total", "limit", "hot", "event", "returned"); got != float64(again-1) {
		t.Fatalf("returned %v units, want %d", got, again-1)
	}
	if got := lc.metric(owner, "weir_lease_units_total", "limit", "hot", "event", "credited"); got != float64(again-1) {
		t.Fatalf("owner credited %v units, want %d", got, again-1)
	}
	if got := lc.metric(p, "weir_lease_decisions_total", "limit", "hot", "outcome", "spent") - spentBefore; got != float64(held+1) {
		t.Fatalf("spent decisions %v, want %d", got, held+1)
	}
	if lc.metric(p, "weir_lease_rpcs_total", "result", "ok") < 2 {
		t.Fatal("lease RPCs not counted")
	}
}

// Units out on leases are not refilled at the owner: a while after a
// grant, when the charge alone would have rested the key, the owner still
// admits only the burst minus what the peer holds, at one instant.
func TestLeases_ownerDecidesOnEffectiveTAT(t *testing.T) {
	lc := newLeaseCluster(t, 2, false)
	owner, peers := lc.ownerAndPeers("t1")
	p := peers[0]
	lc.warm(p, hotKV)
	for lc.units(p, hotKV) < 20 { // demand grows until the lease is full size
		for range 30 {
			lc.decide(p, hotKV)
		}
		// Past the TTL: the next tick asks anew, sized from the demand
		// (probes while the lease ran dry kept it alive, but not full).
		lc.clock.Add(300 * time.Millisecond)
		lc.tick()
	}
	lc.clock.Add(time.Second) // the key rests, as far as its TAT says
	lc.tick()                 // refresh: a new lease of 20
	held := lc.units(p, hotKV)
	lc.clock.Add(100 * time.Millisecond) // the grant's charge has refilled; the lease has not ended
	admitted := int64(0)
	for range 200 {
		if lc.decide(owner, hotKV).Allowed {
			admitted++
		}
	}
	if admitted+held > hotLimit.Burst {
		t.Fatalf("owner admitted %d while %s holds %d: %d units at one instant, burst %d", admitted, p, held, admitted+held, hotLimit.Burst)
	}
	if admitted != hotLimit.Burst-held {
		t.Fatalf("owner admitted %d, want %d (burst minus the leased units)", admitted, hotLimit.Burst-held)
	}
}

// A partitioned peer spends what it holds until its lease ends, then stops;
// what it did not spend is counted stranded, and the owner writes it off.
func TestLeases_partitionedPeerStrandsAtExpiry(t *testing.T) {
	lc := newLeaseCluster(t, 2, false)
	owner, peers := lc.ownerAndPeers("t1")
	p := peers[0]
	lc.warm(p, hotKV)
	held := lc.units(p, hotKV)
	lc.net.Partition([]string{p}, []string{owner})
	if d := lc.decide(p, hotKV); !d.Allowed || d.Fallback != nil {
		t.Fatalf("a partitioned peer with units did not decide from them: %+v", d)
	}
	lc.clock.Add(300 * time.Millisecond) // past the 250ms TTL
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	lc.nodes[p].leases.Tick(ctx) // refresh abandoned: nothing comes back
	if got := lc.units(p, hotKV); got != 0 {
		t.Fatalf("%d units spendable after expiry", got)
	}
	stranded := lc.metric(p, "weir_lease_units_total", "limit", "hot", "event", "stranded") +
		lc.metric(p, "weir_lease_units_total", "limit", "hot", "event", "lost")
	if stranded != float64(held-1) {
		t.Fatalf("stranded+lost %v, want %d", stranded, held-1)
	}
	lc.net.HealAll()
	lc.clock.Add(time.Second)
	lc.tick() // the owner's sweep writes the expired lease off
	if got := lc.metric(owner, "weir_lease_units_total", "limit", "hot", "event", "expired"); got < float64(held) {
		t.Fatalf("owner expired %v units, want at least %d", got, held)
	}
}

// Once the owner denies a forwarded request on a saturated key, the peer
// refuses that key itself until one unit would fit, never earlier than the
// owner would, and without a hop per request.
func TestLeases_saturatedKeyRefusedLocally(t *testing.T) {
	lc := newLeaseCluster(t, 2, false)
	owner, peers := lc.ownerAndPeers("t1")
	p := peers[0]
	for lc.decide(owner, hotKV).Allowed {
	}
	lc.decide(p, hotKV) // tracked and forwarded: the owner denies
	d := lc.decide(p, hotKV)
	sent := lc.net.Sent(p, owner)
	for range 50 {
		if d := lc.decide(p, hotKV); d.Allowed {
			t.Fatal("admitted on a saturated key")
		}
	}
	if got := lc.net.Sent(p, owner); got != sent {
		t.Fatalf("%d hops for 50 refusals, want 0", got-sent)
	}
	if d.RetryAfter <= 0 {
		t.Fatalf("local refusal without retry-after: %+v", d)
	}
	lc.clock.Add(d.RetryAfter)
	if d := lc.decide(p, hotKV); !d.Allowed {
		t.Fatalf("denied once the owner's retry-after passed: %+v", d)
	}
}

// A limit whose burst is too small for the cluster is never leased, and a
// request that also matches a non-leasable limit is always forwarded.
func TestLeases_notLeasableForwards(t *testing.T) {
	lc := newLeaseCluster(t, 3, false)
	small := map[string]string{"room": "r1"} // burst 8 < 4 x 3
	mixed := map[string]string{"tenant": "t1", "user": "u1"}
	for _, kv := range []map[string]string{small, mixed} {
		group := kv["room"]
		if group == "" {
			group = kv["tenant"]
		}
		owner, peers := lc.ownerAndPeers(group)
		before := lc.net.Sent(peers[0], owner)
		for range 20 {
			lc.decide(peers[0], kv)
			lc.clock.Add(time.Millisecond)
			lc.tick()
		}
		if got := lc.net.Sent(peers[0], owner) - before; got < 20 {
			t.Errorf("%v: %d hops for 20 requests, want every one forwarded", kv, got)
		}
	}
}

// A burst just big enough to lease is shared at most half: no grant
// exceeds burst/2, however large the demand or the lease max.
func TestLeases_burstSmallerThanCap(t *testing.T) {
	lc := newLeaseCluster(t, 2, false) // burst 8 = 4 x 2: leasable
	room := map[string]string{"room": "r1"}
	_, peers := lc.ownerAndPeers("r1")
	lc.warm(peers[0], room)
	for range 5 {
		for range 50 {
			lc.decide(peers[0], room)
		}
		lc.clock.Add(100 * time.Millisecond)
		lc.tick()
		if got := lc.units(peers[0], room); got > 4 {
			t.Fatalf("holds %d units of a burst of 8, cap is 4", got)
		}
	}
}

// A grant whose write-through fails is not given: the peer gets an error,
// and the owner credits the units back at once, so no open lease of the
// peer is left to answer its next refresh Busy (forwarding) until it
// expires.
func TestLeases_failedWriteThroughRevokes(t *testing.T) {
	lc := newLeaseCluster(t, 2, true)
	owner, peers := lc.ownerAndPeers("t1")
	p := peers[0]
	lc.warm(p, hotKV)
	lc.redis.Stop()
	credited := lc.metric(owner, "weir_lease_units_total", "limit", "hot", "event", "credited")
	lc.clock.Add(200 * time.Millisecond) // due: 40% of the TTL left
	lc.decide(p, hotKV)
	lc.tick()
	if got := lc.units(p, hotKV); got != 0 {
		t.Fatalf("%d units held after a grant that was not stored", got)
	}
	if got := lc.metric(owner, "weir_lease_grants_total", "limit", "hot", "outcome", "error"); got != 1 {
		t.Fatalf("error answers %v, want 1", got)
	}
	if out := lc.nodes[owner].grants.Leased("t1", keyOf(hotKV)); out != 0 {
		t.Fatalf("owner still counts %d units out after the failed write", out)
	}
	// The return of the old lease and the revoked grant were both credited.
	if got := lc.metric(owner, "weir_lease_units_total", "limit", "hot", "event", "credited"); got <= credited {
		t.Fatalf("credited %v units, no more than the %v before: the revoked grant was not credited", got, credited)
	}
	// The owner holds no lease of the peer's: it asks again a tick later,
	// not after 40% of a TTL of forwarding.
	lc.clock.Add(leaselink.DefaultConfig().Tick)
	lc.decide(p, hotKV)
	lc.tick()
	if got := lc.metric(owner, "weir_lease_grants_total", "limit", "hot", "outcome", "error"); got != 2 {
		t.Fatalf("error answers %v a tick after the first, want 2: the peer did not ask again", got)
	}
}

// Run ticks until Shutdown, which waits for it and may be called again;
// without Run it returns at once.
func TestLeases_RunLeases_shutdown(t *testing.T) {
	lc := newLeaseCluster(t, 2, false)
	_, peers := lc.ownerAndPeers("t1")
	c := lc.nodes[peers[0]].leases
	for range 10 { // demand enough for a lease at the next tick
		lc.decide(peers[0], hotKV)
	}
	exited := make(chan struct{})
	go func() { c.Run(context.Background()); close(exited) }()
	deadline := time.Now().Add(10 * time.Second)
	// The loop runs, and a lease is granted (by its ticks or a probe).
	for !c.Running() || lc.units(peers[0], hotKV) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("Run never refreshed")
		}
		runtime.Gosched()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	// Run has returned once Shutdown has (Shutdown waits for it); the
	// goroutine's close comes just after, so wait for it, boundedly.
	select {
	case <-exited:
	case <-ctx.Done():
		t.Fatal("Run did not return after Shutdown")
	}
	if err := c.Shutdown(ctx); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	idle := lc.nodes[lc.names()[0]].leases
	if idle != c {
		if err := idle.Shutdown(ctx); err != nil {
			t.Fatalf("Shutdown without Run: %v", err)
		}
	}
}
