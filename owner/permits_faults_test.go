package owner

import (
	"testing"
	"time"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/redisbackend/redistest"
)

// A renewal Redis did not take is undone and answered redis_unavailable:
// a successor owner would load the old expiry and admit beyond N while
// the holder, told it renewed, still works. A renewal Redis took survives
// the hand-off.
func TestOwner_permits_renewWriteThrough(t *testing.T) {
	a, redis := newPermitPair(t, true, 0)
	b := newPermitOwner(t, "b", a.ring, a.clk, redis, 0)
	const n, ttl = 1, time.Minute
	r, agg, _, err := a.acquire(t, n, ttl, 1, nil)
	if err != nil || !agg.Allowed {
		t.Fatal(agg, err)
	}
	tok, first := r.Grant.Permit, a.now()+ttl.Nanoseconds()
	a.clk.Advance(50 * time.Second)
	redis.FailNext(redistest.OpStoreSets, 1, redistest.Refused())
	g, err := a.op(t, decide.OpRenew, tok, n, ttl, 0)
	if reason(err) != "redis_unavailable" || g.Done {
		t.Fatalf("renew over a failed write: %+v, %v; want redis_unavailable, not renewed", g, err)
	}
	if _, _, ps, _ := a.o.Permits("t1", concKey, a.now()); len(ps) != 1 || ps[0].Expiry != first {
		t.Fatalf("the failed renewal was kept in memory: %+v, want expiry %d", ps, first)
	}
	g, err = a.op(t, decide.OpRenew, tok, n, ttl, 0)
	if err != nil || !g.Done {
		t.Fatalf("renew: %+v, %v", g, err)
	}
	a.clk.Advance(20 * time.Second) // past the first expiry, within the renewed one
	a.ring.move("b")
	a.o.Drop(t.Context(), func(string) bool { return true })
	if _, agg, _, err := b.acquire(t, n, ttl, 1, nil); err != nil || agg.Allowed {
		t.Fatalf("the new owner admitted a second permit beside the renewed one: %+v, %v", agg, err)
	}
}

// A permit denial evaluates no rate key: their results say "admitting,
// not evaluated", never a denial they did not make.
func TestOwner_permits_denialLeavesRateKeysUnjudged(t *testing.T) {
	f, _ := newPermitPair(t, true, 0)
	rate := gcra.Limit{Interval: time.Second.Nanoseconds(), Burst: 10}
	if _, agg, _, err := f.acquire(t, 1, time.Minute, 1, &rate); err != nil || !agg.Allowed {
		t.Fatal(agg, err)
	}
	_, agg, out, err := f.acquire(t, 1, time.Minute, 1, &rate)
	if err != nil || agg.Allowed || out[0].Allowed || !out[1].Allowed {
		t.Fatalf("denied by permits: %+v %+v, %v; want the rate key reported admitting", agg, out, err)
	}
}

// Reserve on a request whose only keys are concurrency keys reserves
// nothing and still acquires.
func TestOwner_permits_reserveWithoutRateKeys(t *testing.T) {
	f, _ := newPermitPair(t, true, 0)
	r := &decide.Request{Group: "t1", Keys: []string{concKey}, Limits: []gcra.Limit{{Burst: 2, Interval: time.Minute.Nanoseconds()}},
		Defs: []*decide.Def{concDef}, Cost: 1, Now: f.now(), Reserve: true, Grant: &decide.Grant{}}
	agg, err := f.o.Decide(t.Context(), r, make([]gcra.Result, 1))
	if err != nil || !agg.Allowed || r.Grant.Permit == nil || r.Grant.Reservation != nil {
		t.Fatalf("%+v grant %+v, %v; want a permit and no reservation", agg, r.Grant, err)
	}
}

// A write-through that fails after the rate keys were charged answers
// permits_unavailable (so the sender records no fallback debt for them:
// they stay charged here) and drops the reservation it recorded.
func TestOwner_permits_failedWriteAfterRateCharge(t *testing.T) {
	f, redis := newPermitPair(t, true, 0)
	rate := gcra.Limit{Interval: time.Second.Nanoseconds(), Burst: 10}
	redis.FailNext(redistest.OpStoreSets, 1, redistest.Refused())
	r := &decide.Request{Group: "t1", Keys: []string{concKey, permitRateKey},
		Limits: []gcra.Limit{{Burst: 2, Interval: time.Minute.Nanoseconds()}, rate},
		Defs:   []*decide.Def{concDef, permitRateDef}, Cost: 1, Now: f.now(), Reserve: true, Grant: &decide.Grant{}}
	_, err := f.o.Decide(t.Context(), r, make([]gcra.Result, 2))
	if reason(err) != limiter.ReasonPermitsUnavailable || r.Grant.Permit != nil || r.Grant.Reservation != nil {
		t.Fatalf("%v grant %+v; want permits_unavailable and no tokens", err, r.Grant)
	}
	if n := f.o.reserve.table.Len(); n != 0 {
		t.Fatalf("%d reservations left open by a failed request", n)
	}
	if got := f.inFlight(t); got != 0 {
		t.Fatalf("%d permits in flight after a failed write-through", got)
	}
	if tat := f.mem.Get("t1", permitRateKey); tat <= f.now() {
		t.Fatal("the rate key's charge was undone: the sender's fallback would charge it again")
	}
}
