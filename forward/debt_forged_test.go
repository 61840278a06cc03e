package forward

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/intake"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/policy"
)

// TestRouter_forgedDebtIsRefusedOrBounded sends forged fallback-debt items
// through the owner's Validator (intake.Validator), as the peer listener does: items the
// public API could never produce are refused and change nothing, and a debt
// of any size on a real key spends it at most to now + its own limit's span,
// so it can delay the key by one emission interval, never lock it.
func TestRouter_forgedDebtIsRefusedOrBounded(t *testing.T) {
	tc := newTestCluster(t, 3, false)
	ownerNode := tc.nodes[tc.owner("t1")]
	foreign := ""
	for i := 2; foreign == ""; i++ {
		if g := fmt.Sprint("t", i); ownerNode.routes.Owner(g) != ownerNode.name {
			foreign = g
		}
	}
	v, err := intake.NewValidator(intake.DefaultValidatorConfig(), ownerNode.owner, policy.Static(tc.pol), tc.clock.Nanos, nil)
	if err != nil {
		t.Fatal(err)
	}
	const key = "weir:{t1}:per-user:t1:u1"
	now := tc.clock.Nanos()
	huge := gcra.Limit{Interval: int64(24 * time.Hour), Burst: 1_000_000}
	forged := func(mutate func(*decide.Request)) decide.Request {
		it := debtItem(key, 1, now)
		mutate(&it)
		return it
	}
	held := func(group, key string) bool { return ownerNode.mem.Has(group, key) }

	for name, it := range map[string]decide.Request{
		"cost over MaxCost":   forged(func(it *decide.Request) { it.Cost = limiter.MaxCost + 1 }),
		"key of another tag":  forged(func(it *decide.Request) { it.Keys = []string{"weir:{t9}:per-user:t9:u1"} }),
		"now ten years ahead": forged(func(it *decide.Request) { it.Now += int64(10 * 365 * 24 * time.Hour) }),
		"now near MaxInt64":   forged(func(it *decide.Request) { it.Now = 1<<63 - 1 }),
		"interval over a day": forged(func(it *decide.Request) {
			it.Keys = []string{"weir:{t1}:unknown-limit:t1:u1"}
			it.Limits = []gcra.Limit{{Interval: huge.Interval * 2, Burst: 1}}
		}),
	} {
		res := v.HandleDecide(t.Context(), "forger", []decide.Request{it})[0]
		if !errors.Is(res.Err, intake.ErrRefused) {
			t.Errorf("%s: %+v, want refused", name, res)
		}
	}
	for name, it := range map[string]decide.Request{
		"two keys": forged(func(it *decide.Request) {
			it.Keys = append(it.Keys, "weir:{t1}:per-user:t1:u2")
			it.Limits = append(it.Limits, perUser)
		}),
		"strict": forged(func(it *decide.Request) { it.Strict = true }),
	} {
		if res := v.HandleDecide(t.Context(), "forger", []decide.Request{it})[0]; res.Err == nil {
			t.Errorf("%s: %+v, want an error", name, res)
		}
	}
	if held("t1", key) || held("t1", "weir:{t1}:per-user:t1:u2") || held("t1", "weir:{t1}:unknown-limit:t1:u1") {
		t.Fatal("a refused debt item left state in owner memory")
	}

	// A group this node does not own is answered NotOwner, untouched.
	fk := "weir:{" + foreign + "}:per-user:" + foreign + ":u1"
	res := v.HandleDecide(t.Context(), "forger", []decide.Request{forged(func(it *decide.Request) { it.Group, it.Keys = foreign, []string{fk} })})[0]
	if res.NotOwner == "" || held(foreign, fk) {
		t.Fatalf("debt for foreign group %s: %+v, held %v; want NotOwner and no state", foreign, res, held(foreign, fk))
	}

	// The largest debt with a huge forged limit on a real key: the owner's
	// numbers replace the sender's, and the charge stops at now + span.
	// Sent twice, it moves the key no further.
	for range 2 {
		res = v.HandleDecide(t.Context(), "forger", []decide.Request{forged(func(it *decide.Request) {
			it.Cost, it.Limits = limiter.MaxCost, []gcra.Limit{huge}
		})})[0]
		if res.Err != nil || ownerNode.mem.Get("t1", key) != now+perUser.Span() {
			t.Fatalf("huge debt: %+v, TAT %d; want TAT = now + %d (the owner's span)", res, ownerNode.mem.Get("t1", key)-now, perUser.Span())
		}
	}
	kv := map[string]string{"tenant": "t1", "user": "u1"}
	if d := tc.decide(ownerNode.name, kv); d.Allowed || d.RetryAfter > time.Duration(perUser.Interval) {
		t.Fatalf("after the debt: allowed %v, retry after %v; want denied for at most one interval", d.Allowed, d.RetryAfter)
	}
	tc.clock.Add(time.Duration(perUser.Interval))
	if d := tc.decide(ownerNode.name, kv); !d.Allowed {
		t.Fatalf("one interval after the debt the key is still denied: %+v", d)
	}

	// A debt stamped at the edge of the allowed skew ends no later than the
	// owner's clock + MaxSkew + span.
	const edgeKey = "weir:{t1}:per-user:t1:edge"
	ownerNow := tc.clock.Nanos()
	edge := debtItem(edgeKey, limiter.MaxCost, ownerNow+intake.DefaultMaxSkew.Nanoseconds())
	if res := v.HandleDecide(t.Context(), "forger", []decide.Request{edge})[0]; res.Err != nil {
		t.Fatalf("debt at the skew edge: %+v", res)
	}
	if tat := ownerNode.mem.Get("t1", edgeKey); tat > ownerNow+intake.DefaultMaxSkew.Nanoseconds()+perUser.Span() {
		t.Fatalf("TAT %d ahead of the owner's clock, over MaxSkew + span", tat-ownerNow)
	}
}
