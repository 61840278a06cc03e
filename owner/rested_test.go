package owner

import (
	"testing"
	"time"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/lease"
	"github.com/weirhq/weir/metrictest"
	"github.com/weirhq/weir/redisbackend"
	"github.com/weirhq/weir/redisbackend/redistest"
)

// The load rule (package rested): a key absent from memory, of a group this
// owner has owned without a change for longer than the key's span plus the
// margin, decides as rested with no load; any ownership change, memory drop
// or thaw starts over, and then a TAT an earlier owner left in Redis is
// honoured exactly.

var margin = DefaultConfig().Rested.Margin

// reach is how far ahead an earlier owner's TAT of a key of l can be: a
// settlement's excess leaves it up to twice the span ahead (gcra.Settle).
func reach(l gcra.Limit) time.Duration { return time.Duration(2 * l.Span()) }

// spendAt writes, as another owner deciding at at (now on the twin's
// clock), key's TAT with the whole of l's burst spent and as much again
// charged by a settlement: the furthest any earlier owner's TAT can reach.
func (f *twinOwner) spendAt(t *testing.T, key string, l gcra.Limit, at int64) int64 {
	t.Helper()
	tat := at + int64(reach(l))
	if err := f.redis.StoreTATs(t.Context(), []redisbackend.TAT{{Key: key, TAT: tat, Now: at}}); err != nil {
		t.Fatal(err)
	}
	return tat
}

func (f *twinOwner) loads() int { return f.redis.Calls(redistest.OpLoad) }

// newRestedOwner is newTwinOwner once its first ring is installed, when
// its ownership begins.
func newRestedOwner(t *testing.T) *twinOwner {
	f := newTwinOwner(t)
	f.o.OwnershipChanging()
	return f
}

// Before its first ring an owner rests nothing: a node that has not joined
// its cluster would own every group while the others decide them.
func TestOwner_Decide_nothingRestsBeforeTheFirstRing(t *testing.T) {
	f := newTwinOwner(t)
	f.clk.Advance(10 * margin)
	if _, err := f.decide(t, f.userRequest("u1")); err != nil || f.loads() != 1 {
		t.Fatalf("%v, %d loads; want 1", err, f.loads())
	}
}

// Past span + margin, first touches need no load, and decide as a load
// would have: the previous owner's TAT is in the past.
func TestOwner_Decide_ownedPastSpanAndMarginNeedsNoLoad(t *testing.T) {
	f := newRestedOwner(t)
	r := f.userRequest("u1")
	f.clk.Advance(margin)
	f.spendAt(t, r.Keys[1], tenantLimit, f.now()) // its last decision, as late as the margin allows
	f.clk.Advance(reach(tenantLimit))
	for i := range 3 {
		r := f.userRequest("u" + string(rune('a'+i)))
		agg, err := f.decide(t, r)
		if err != nil || !agg.Allowed || agg.Remaining != userLimit.Burst-1 {
			t.Fatalf("rested decision %d: %+v, %v", i, agg, err)
		}
	}
	if n := f.loads(); n != 0 {
		t.Fatalf("%d loads of keys owned past span + margin, want 0", n)
	}
	if got := metrictest.Value(t, f.reg, "weir_redis_commands_total", "op", "load_tats"); got != 0 {
		t.Fatalf("weir_redis_commands_total{op=load_tats} = %v, want 0", got)
	}
}

// Within span + margin of ownership starting, a key is loaded, and the TAT
// the previous owner wrote at the margin's end is honoured. The per-user
// key (shorter span) is already rested: only the per-tenant key is loaded.
func TestOwner_Decide_withinSpanAndMarginLoads(t *testing.T) {
	f := newRestedOwner(t)
	r := f.userRequest("u1")
	f.clk.Advance(margin)
	spent := f.spendAt(t, r.Keys[1], tenantLimit, f.now()) // as late as the margin allows
	f.clk.Advance((reach(userLimit) + reach(tenantLimit)) / 2)
	r.Now = f.now()
	if r.Now >= spent {
		t.Fatal("test setup: the spent TAT is already in the past")
	}
	agg, err := f.decide(t, r)
	if err != nil || f.loads() != 1 {
		t.Fatalf("decision within the tenant key's span + margin: %+v, %v, %d loads; want 1 load", agg, err, f.loads())
	}
	if got := f.mem.Get("t1", r.Keys[1]); got != spent+tenantLimit.Interval {
		t.Fatalf("per-tenant TAT %d, want %d: the previous owner's TAT plus one unit", got, spent+tenantLimit.Interval)
	}
	u := &decide.Request{Group: "t1", Keys: []string{"weir:{t1}:per-user:t1:u2"}, Limits: []gcra.Limit{userLimit}, Cost: 1, Now: f.now()}
	if agg, err := f.decide(t, u); err != nil || !agg.Allowed || f.loads() != 1 {
		t.Fatalf("per-user key past its span + margin: %+v, %v, %d loads; want allowed with no load", agg, err, f.loads())
	}
}

// A settlement may leave a TAT twice the span ahead (gcra.Settle caps its
// excess there): past span + margin of ownership, but within twice the
// span, a first touch still loads, and the debt the previous owner's
// settlement charged is honoured: denied, not decided as rested.
func TestOwner_Decide_settledDebtWithinTwiceTheSpanLoads(t *testing.T) {
	f := newRestedOwner(t)
	key := "weir:{t1}:per-user:t1:u1"
	f.clk.Advance(margin)
	at := f.now()
	debt := at + 2*userLimit.Span() // what a settlement's excess can leave
	if err := f.redis.StoreTATs(t.Context(), []redisbackend.TAT{{Key: key, TAT: debt, Now: at}}); err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(time.Duration(userLimit.Span() + userLimit.Interval/2)) // past span + margin
	r := &decide.Request{Group: "t1", Keys: []string{key}, Limits: []gcra.Limit{userLimit}, Cost: 1, Now: f.now()}
	agg, err := f.decide(t, r)
	if err != nil || agg.Allowed || f.loads() != 1 {
		t.Fatalf("within twice the span of a settlement: %+v, %v, %d loads; want denied after a load", agg, err, f.loads())
	}
	if got := f.mem.Get("t1", key); got != debt {
		t.Fatalf("TAT %d, want the settled %d", got, debt)
	}
}

// Ownership gained while the memory's epoch stands still (the ring changed,
// the hand-off has not run yet) restarts the rule: the TAT the previous
// owner left is loaded and honoured. Without OwnershipChanging the owner
// would count its ownership from New and read the key as rested.
func TestOwner_OwnershipChanging_restartsTheRule(t *testing.T) {
	f := newRestedOwner(t)
	f.clk.Advance(10 * margin) // owned for long
	f.ring.move("b")
	f.o.OwnershipChanging() // the group comes back: "b" decided it until now
	f.ring.move("a")
	r := f.userRequest("u1")
	f.spendAt(t, r.Keys[0], userLimit, r.Now)
	if agg, err := f.decide(t, r); err != nil || agg.Allowed || f.loads() != 1 {
		t.Fatalf("first decision after gaining the group: %+v, %v, %d loads; want denied after a load", agg, err, f.loads())
	}
	// span + margin later every first touch is rested again.
	f.clk.Advance(margin + reach(tenantLimit))
	if agg, err := f.decide(t, f.userRequest("u2")); err != nil || !agg.Allowed || f.loads() != 1 {
		t.Fatalf("after span + margin: %+v, %v, %d loads; want allowed with no new load", agg, err, f.loads())
	}
}

// Every drop moves the memory's epoch and restarts the rule: a rejoin after
// a split (the other side decided this node's groups from Redis), a
// hand-off, a thaw.
func TestOwner_Drop_restartsTheRule(t *testing.T) {
	for _, tc := range []struct {
		name      string
		pre, drop func(f *twinOwner)
	}{
		{"rejoin drops everything", nil, func(f *twinOwner) { f.o.Drop(t.Context(), func(string) bool { return true }) }},
		{"a hand-off drops nothing of this group", nil, func(f *twinOwner) { f.o.Drop(t.Context(), func(string) bool { return false }) }},
		{"thaw after a freeze", func(f *twinOwner) {
			f.o.StartHeartbeat()
			f.clk.Advance(DefaultConfig().FreezeLimit + time.Millisecond)
		}, func(f *twinOwner) {
			f.o.Beat(t.Context())
			if f.o.Thawing() {
				t.Fatal("still thawing after a beat")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRestedOwner(t)
			f.clk.Advance(10 * margin)
			if tc.pre != nil {
				tc.pre(f)
			}
			r := f.userRequest("u1")
			f.spendAt(t, r.Keys[0], userLimit, r.Now) // decided elsewhere meanwhile
			tc.drop(f)
			r.Now = f.now()
			if agg, err := f.decide(t, r); err != nil || agg.Allowed || f.loads() != 1 {
				t.Fatalf("after the drop: %+v, %v, %d loads; want denied after a load", agg, err, f.loads())
			}
		})
	}
}

// A leasable key's span includes the lease TTL: a grant's write-through
// folds its units at the lease's expiry.
func TestOwner_Decide_leasableSpanIncludesTTL(t *testing.T) {
	f := newRestedOwner(t)
	terms := &lease.Terms{Max: 2, TTL: time.Second}
	req := func(user string) *decide.Request {
		return &decide.Request{Group: "t1", Keys: []string{"weir:{t1}:per-user:t1:" + user}, Limits: []gcra.Limit{userLimit},
			Defs: []*decide.Def{{Name: "per-user", Lease: terms}}, Cost: 1, Now: f.now()}
	}
	f.clk.Advance(margin + reach(userLimit) + terms.TTL/2)
	if _, err := f.decide(t, req("u1")); err != nil || f.loads() != 1 {
		t.Fatalf("leasable key within span + TTL + margin: %v, %d loads, want 1", err, f.loads())
	}
	f.clk.Advance(terms.TTL / 2)
	if _, err := f.decide(t, req("u2")); err != nil || f.loads() != 1 {
		t.Fatalf("leasable key past span + TTL + margin: %v, %d loads, want still 1", err, f.loads())
	}
}

// Keys whose span the owner cannot tell always load: a global key (decided
// at a regional share) and a key touched without its limit (UpdateOwned).
func TestOwner_Decide_unknownSpanLoads(t *testing.T) {
	f := newRestedOwner(t)
	f.clk.Advance(10 * margin)
	r := &decide.Request{Group: "t1", Keys: []string{"weir:{t1}:per-user:t1:u1"}, Limits: []gcra.Limit{userLimit},
		Defs: []*decide.Def{{Name: "per-user", Global: true}}, Cost: 1, Now: f.now()}
	if _, err := f.decide(t, r); err != nil || f.loads() != 1 {
		t.Fatalf("global key: %v, %d loads, want 1", err, f.loads())
	}
	_, err := f.o.UpdateOwned(t.Context(), "t1", "weir:{t1}:per-user:t1:u2", f.now(), true, func(tat int64, _ bool) (int64, error) { return tat, nil })
	if err != nil || f.loads() != 2 {
		t.Fatalf("UpdateOwned: %v, %d loads, want 2", err, f.loads())
	}
}

// Forwarded work on rested keys is decided from memory (HandleDecide's
// fast path), with no load.
func TestOwner_HandleDecide_restedKeysDecideFromMemory(t *testing.T) {
	f := newRestedOwner(t)
	f.clk.Advance(margin + reach(tenantLimit))
	res := f.o.HandleDecide(t.Context(), "b", []decide.Request{*f.userRequest("u1"), *f.userRequest("u2")})
	for i, r := range res {
		if r.Err != nil || !r.Overall.Allowed {
			t.Fatalf("item %d: %+v", i, r)
		}
	}
	if f.loads() != 0 {
		t.Fatalf("%d loads, want 0", f.loads())
	}
}

// MayWait, which knows no span, guesses with the widest span decided so
// far: once that has rested, an absent key is not expected to wait.
func TestOwner_MayWait_restedKeysDoNotWait(t *testing.T) {
	f := newRestedOwner(t)
	f.clk.Advance(margin + reach(tenantLimit))
	key := "weir:{t1}:per-user:t1:u9"
	if !f.o.MayWait("t1", key, false) {
		t.Fatal("no span seen yet: an absent key may wait")
	}
	if _, err := f.decide(t, f.userRequest("u1")); err != nil {
		t.Fatal(err)
	}
	if f.o.MayWait("t1", key, false) || !f.o.MayWait("t1", key, true) {
		t.Fatal("a rested fast key may wait, or a strict one may not")
	}
	f.o.Drop(t.Context(), func(string) bool { return false })
	if !f.o.MayWait("t1", key, false) {
		t.Fatal("an absent key after a drop is not expected to wait")
	}
}
