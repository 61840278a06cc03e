package forward

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/metrictest"
	"github.com/weirhq/weir/policy"
)

// fallbackFault admits by fallback at a non-owner while the owner is cut
// off, heals, and then spends what the owner still admits, all at one
// instant. It returns the units admitted in total. With debt the non-owner
// repays its fallback admissions to the owner once the owner answers.
func fallbackFault(t *testing.T, withDebt, withRedis bool) (admitted int, owner *testNode) {
	tc := newTestCluster(t, 2, withRedis)
	kv := map[string]string{"tenant": "t1", "user": "u1"}
	ownerName := tc.owner("t1")
	other := "node-0"
	if ownerName == other {
		other = "node-1"
	}
	o, x := tc.nodes[ownerName], tc.nodes[other]
	var store limiter.Store = x.router
	if !withDebt {
		store = struct{ limiter.Store }{x.router} // hides RecordFallback
	}
	var err error
	x.lim, err = limiter.New(limiter.DefaultConfig(), policy.Static(tc.pol), store, nil, prometheus.NewRegistry(),
		limiter.WithClock(tc.clock.Now), limiter.WithMembers(x.router.Members))
	if err != nil {
		t.Fatal(err)
	}

	tc.net.Drop(other, ownerName)
	for range 10 {
		d := tc.decide(other, kv)
		if d.Fallback == nil || d.Fallback.Mode != "local" || d.Fallback.Reason != "owner_unreachable" {
			t.Fatalf("decision through the cut: fallback %+v", d.Fallback)
		}
		if d.Allowed {
			admitted++
		}
	}
	// per-user is 50/s burst 5 with no on_failure: one of two nodes falls
	// back to ceil(5/2) = 3.
	if admitted != 3 {
		t.Fatalf("fallback admitted %d at one instant, want the share 3", admitted)
	}
	tc.net.HealAll()
	if d := tc.decide(other, kv); d.Fallback != nil || !d.Allowed {
		t.Fatalf("first decision after the heal: %+v", d)
	}
	admitted++
	if withDebt {
		// 3 units on each key of the composite: per-user and per-tenant.
		waitFor(t, func() bool { return tc.metric(ownerName, "weir_fallback_debt_units_total", "event", "charged") == 6 })
		waitFor(t, func() bool { return x.router.debts.pending.Load() == 0 && !x.router.debts.flushingAny() })
	}
	for range 10 {
		if d := tc.decide(ownerName, kv); d.Allowed {
			admitted++
		}
	}
	return admitted, o
}

func TestRouter_fallbackDebtIsChargedAtTheOwner(t *testing.T) {
	for _, withRedis := range []bool{false, true} {
		t.Run(fmt.Sprint("redis=", withRedis), func(t *testing.T) {
			admitted, owner := fallbackFault(t, true, withRedis)
			if admitted != 5 {
				t.Fatalf("%d admitted at one instant across the fault, want the burst 5: the debt was not charged", admitted)
			}
			if got := metrictest.Value(t, owner.reg, "weir_fallback_debt_units_total", "event", "forgiven"); got != 0 {
				t.Fatalf("forgiven = %v, want 0", got)
			}
		})
	}
}

func TestRouter_withoutDebtTheSameFaultOverAdmits(t *testing.T) {
	if admitted, _ := fallbackFault(t, false, false); admitted != 8 {
		t.Fatalf("%d admitted at one instant, want 3 fallback + 5 at the owner = 8", admitted)
	}
}

// The charged TAT is marked for write-behind, so a new owner loading the
// key from Redis sees the debt too.
func TestRouter_chargedDebtReachesRedis(t *testing.T) {
	tc := newTestCluster(t, 1, true)
	node := tc.nodes["node-0"]
	now := tc.clock.Nanos()
	it := debtItem("weir:{t1}:per-user:t1:u1", 4, now)
	if res := node.owner.ChargeDebt(t.Context(), &it); res.Err != nil || res.Overall.Remaining != 1 {
		t.Fatalf("charge: %+v", res)
	}
	if err := node.wb.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	tats, err := node.redis.LoadTATs(t.Context(), []string{"weir:{t1}:per-user:t1:u1"})
	if err != nil || tats[0] != now+4*perUser.Interval {
		t.Fatalf("Redis holds TAT %v (%v), want now + 4 intervals", tats, err)
	}
}

func TestRouter_debtBeyondTheSpanIsForgiven(t *testing.T) {
	tc := newTestCluster(t, 1, false)
	c := tc.nodes["node-0"].owner
	now := tc.clock.Nanos()
	for range 2 { // 2 of 5 spent
		if d := tc.decide("node-0", map[string]string{"tenant": "t1", "user": "u1"}); !d.Allowed {
			t.Fatal("burst denied")
		}
	}
	it := debtItem("weir:{t1}:per-user:t1:u1", 9, now)
	res := c.ChargeDebt(t.Context(), &it)
	if res.Err != nil || res.Overall.Remaining != 0 || res.Overall.TAT != now+perUser.Span() {
		t.Fatalf("after a debt of 9 on a key with 3 left: %+v, want spent with TAT = now + span", res)
	}
	if ch, fg := tc.metric("node-0", "weir_fallback_debt_units_total", "event", "charged"), tc.metric("node-0", "weir_fallback_debt_units_total", "event", "forgiven"); ch != 3 || fg != 6 {
		t.Fatalf("charged %v, forgiven %v; want 3 and 6", ch, fg)
	}
	bad := it
	bad.Cost = 0
	if res := c.ChargeDebt(t.Context(), &bad); res.Err == nil {
		t.Fatal("a debt of 0 units was accepted")
	}
}

func debtItem(key string, units, now int64) decide.Request {
	return decide.Request{Group: "t1", Keys: []string{key}, Limits: []gcra.Limit{perUser}, Cost: units, Now: now, Debt: true}
}

func TestDebtTable_boundsEntriesAndUnits(t *testing.T) {
	tb := newDebtTable()
	l := gcra.Limit{Interval: 1000, Burst: 4}
	if dropped := tb.add("g", "k0", l, 3); dropped != 0 {
		t.Fatalf("dropped %d", dropped)
	}
	if dropped := tb.add("g", "k0", l, 3); dropped != 2 {
		t.Fatalf("dropped %d beyond a burst, want 2", dropped)
	}
	for i := 1; i < maxDebtKeys; i++ {
		tb.add("g", fmt.Sprint("k", i), l, 1)
	}
	if dropped := tb.add("g", "one-too-many", l, 1); dropped != 4 {
		t.Fatalf("a full table dropped %d units, want the oldest entry's 4", dropped)
	}
	if n := tb.pending.Load(); n != maxDebtKeys {
		t.Fatalf("%d entries, want %d", n, maxDebtKeys)
	}
	now := time.Now()
	got := tb.take("owner", now, func(string) bool { return true })
	if len(got) != maxDebtKeys || got[0].key != "k1" || tb.pending.Load() != 0 {
		t.Fatalf("took %d entries starting at %q", len(got), got[0].key)
	}
	tb.add("g", "later", l, 1)
	if again := tb.take("owner", now.Add(time.Hour), func(string) bool { return true }); again != nil {
		t.Fatal("a second flush to one owner started while the first ran")
	}
	tb.done("owner")
	if tb.flushingAny() {
		t.Fatal("flush still marked running")
	}
	if soon := tb.take("owner", now.Add(debtScanInterval-1), func(string) bool { return true }); soon != nil {
		t.Fatal("looked through the table again within the scan interval")
	}
	if later := tb.take("owner", now.Add(debtScanInterval), func(string) bool { return true }); len(later) != 1 {
		t.Fatalf("took %d entries after the scan interval, want 1", len(later))
	}
}
