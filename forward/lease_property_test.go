package forward

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/weirhq/weir/limiter"
)

// leaseWorkload drives random decisions of cost 1 or 2 on a few hot keys
// at random nodes, with random clock steps, lease ticks at random nodes,
// and short cuts (refused links) between a random node and the rest, and returns
// the admissions per key. Only decisions the cluster made (no fallback)
// count; the hot limit fails closed, so a fallback admits nothing.
func leaseWorkload(lc *leaseCluster, rng *rand.Rand, steps int, churn func(step int)) map[string][]admission {
	adm := map[string][]admission{}
	tenants := []string{"t1", "t2", "t3"}
	var cut []string
	still := 0 // decisions left before the clock moves again
	for step := range steps {
		if churn != nil {
			churn(step)
		}
		names := lc.names()
		slices.Sort(names)
		switch r := rng.IntN(100); {
		case r < 8:
			lc.nodes[names[rng.IntN(len(names))]].leases.Tick(context.Background())
		case r < 9 && cut == nil:
			cut = []string{names[rng.IntN(len(names))]}
			for _, n := range names { // refused both ways: callers fall back at once
				if n != cut[0] {
					lc.net.Drop(n, cut[0])
					lc.net.Drop(cut[0], n)
				}
			}
		case r < 11 && cut != nil:
			lc.net.HealAll()
			cut = nil
		}
		tenant := tenants[rng.IntN(len(tenants))]
		cost := int64(1 + rng.IntN(2))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		d, err := lc.nodes[names[rng.IntN(len(names))]].lim.Decide(ctx, limiter.Request{Descriptors: map[string]string{"tenant": tenant}, Cost: cost})
		cancel()
		if err != nil {
			lc.t.Fatal(err)
		}
		if d.Allowed && d.Fallback == nil {
			adm[tenant] = append(adm[tenant], admission{lc.clock.Nanos(), cost})
		}
		switch d := leaseStep(rng); {
		case still > 0:
			still--
		case d >= 50*time.Millisecond:
			still = 300 // after a pause, a flood at one instant
			fallthrough
		default:
			lc.clock.Add(d)
		}
	}
	lc.net.HealAll()
	return adm
}

// leaseStep is how far the clock moves between two decisions: mostly under
// a millisecond (a key near or past its rate), sometimes not at all (a
// burst at one instant), and now and then a pause of 50 to 200ms, in
// which a key's TAT rests while peers still hold leases: the moment units
// charged at grant time would be refilled if the owner let them. After a
// pause the workload floods the keys at one instant.
func leaseStep(rng *rand.Rand) time.Duration {
	switch r := rng.IntN(1000); {
	case r < 15:
		return time.Duration(50+rng.IntN(150)) * time.Millisecond
	case r < 150:
		return 0
	}
	return time.Duration(rng.IntN(900)) * time.Microsecond
}

// For random interleavings of decisions at random nodes, leases add no
// term: admitted units per key stay within B + W/T over every window.
func TestLeases_property_admittedWithinBound(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			lc := newLeaseCluster(t, 3, false)
			adm := leaseWorkload(lc, rand.New(rand.NewPCG(seed, 13)), 3000, nil)
			spent := 0.0
			for _, n := range lc.names() {
				spent += lc.metric(n, "weir_lease_decisions_total", "limit", "hot", "outcome", "spent")
			}
			if spent == 0 {
				t.Fatal("no decision was made from a lease: the workload tests nothing")
			}
			for tenant, a := range adm {
				checkBound(t, hotLimit, a)
				t.Logf("%s: %d admissions", tenant, len(a))
			}
		})
	}
}

// With Redis, nodes joining, leaving gracefully and crashing while leases
// are out keep the bound: units granted by an old owner stay charged at
// the new one (the grant's folded TAT was written through), and none is
// granted twice.
func TestLeases_property_ownerChangesAndCrashes(t *testing.T) {
	lc := newLeaseCluster(t, 3, true)
	rng := rand.New(rand.NewPCG(7, 7))
	churn := func(step int) {
		switch step {
		case 700:
			lc.addLeasing("node-3")
			lc.sync()
		case 1400:
			owner, _ := lc.ownerAndPeers("t1")
			lc.remove(owner) // graceful: hands off
		case 2100:
			owner, _ := lc.ownerAndPeers("t2")
			lc.crash(owner) // no hand-off: only what it wrote survives
		}
	}
	adm := leaseWorkload(lc, rng, 2800, churn)
	for _, a := range adm {
		checkBound(t, hotLimit, a)
	}
}
