package intake

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/metrictest"
	"github.com/weirhq/weir/permit"
	"github.com/weirhq/weir/policy"
)

// kindPolicy has a limit the tests mark concurrency (jobs: 5 in flight,
// permits of 30s, written as a rate until the policy has kind:
// concurrency), a fast rate limit and a strict one.
const kindPolicy = `
version: "kinds"
tenant_descriptor: tenant
defaults: {consistency: fast, on_failure: open}
limits:
  - name: jobs
    match: [tenant, job]
    rate: 2/m
    burst: 5
  - name: calls
    match: [tenant]
    rate: 10/s
    burst: 10
  - name: strict-calls
    match: [tenant, api]
    rate: 10/s
    burst: 10
    group: api
    consistency: strict
`

const (
	jobsKey   = "weir:{t1}:jobs:t1:j1"
	callsKey  = "weir:{t1}:calls:t1"
	strictKey = "weir:{a}:strict-calls:t1:a" // group a
	otherKey  = "weir:{t1}:not-in-policy:t1"
)

var (
	jobsLimit  = gcra.Limit{Interval: 30e9, Burst: 5}
	callsLimit = gcra.Limit{Interval: 1e8, Burst: 10}
	limitOf    = map[string]gcra.Limit{jobsKey: jobsLimit, callsKey: callsLimit, strictKey: callsLimit, otherKey: callsLimit}
)

// newKindValidator returns a Validator over kindPolicy whose jobs limit
// is a concurrency limit (its Def says so), recording what it passes.
func newKindValidator(t *testing.T, now int64) (*Validator, *recordingHandler, *prometheus.Registry) {
	t.Helper()
	p, err := policy.Parse("kinds.yaml", []byte(kindPolicy))
	if err != nil {
		t.Fatal(err)
	}
	h, reg := &recordingHandler{}, prometheus.NewRegistry()
	v, err := NewValidator(DefaultValidatorConfig(), h, staticPolicy{p}, func() int64 { return now }, reg)
	if err != nil {
		t.Fatal(err)
	}
	v.defOf = func(l *policy.Limit) *decide.Def {
		d := *l.Def()
		d.Concurrency = l.Name == "jobs"
		return &d
	}
	return v, h, reg
}

// kindItem is a decision of cost 1 on keys at now, in group t1 (a for
// strictKey).
func kindItem(now int64, keys ...string) Item {
	it := Item{Group: "t1", Keys: keys, Cost: 1, Now: now}
	if keys[0] == strictKey {
		it.Group = "a"
	}
	for _, k := range keys {
		it.Limits = append(it.Limits, limitOf[k])
	}
	return it
}

// opOn is an op of kind on keys: cost 0, id 1.
func opOn(now int64, kind decide.OpKind, keys ...string) Item {
	it := kindItem(now, keys...)
	it.Cost, it.Op = 0, &decide.Op{Kind: kind, ID: [16]byte{0: 1}}
	return it
}

func TestValidator_passesConcurrencyReserveAndOps(t *testing.T) {
	const now = int64(1_700_000_000_000_000_000)
	for name, it := range map[string]Item{
		"acquire":                 kindItem(now, jobsKey, callsKey),
		"reserve":                 func() Item { it := kindItem(now, callsKey); it.Reserve = true; return it }(),
		"reserve with a permit":   func() Item { it := kindItem(now, jobsKey, callsKey); it.Reserve = true; return it }(),
		"strict without permits":  func() Item { it := kindItem(now, strictKey); it.Strict = true; return it }(),
		"debt on a rate key":      func() Item { it := kindItem(now, callsKey); it.Debt = true; return it }(),
		"release":                 opOn(now, decide.OpRelease, jobsKey),
		"renew for the limit ttl": opOn(now, decide.OpRenew, jobsKey),
		"renew for 24h":           func() Item { it := opOn(now, decide.OpRenew, jobsKey); it.Op.TTL = permit.MaxTTL; return it }(),
		"settle":                  func() Item { it := opOn(now, decide.OpSettle, callsKey); it.Op.Actual = 7; return it }(),
		"settle at MaxSpan":       func() Item { it := opOn(now, decide.OpSettle, callsKey); it.Op.Actual = gcra.MaxSpan; return it }(),
	} {
		t.Run(name, func(t *testing.T) {
			v, h, _ := newKindValidator(t, now)
			rs := v.HandleDecide(t.Context(), "n2", []Item{it})
			if rs[0].Err != nil || len(h.items) != 1 {
				t.Fatalf("refused: %v", rs[0].Err)
			}
			got := h.items[0]
			for i, k := range got.Keys {
				if d := got.Def(i); d == nil || d.Concurrency != (k == jobsKey) {
					t.Fatalf("key %s has Def %+v", k, d)
				}
			}
			if (got.Op == nil) != (it.Op == nil) || got.Reserve != it.Reserve || got.Cost != it.Cost {
				t.Fatalf("passed %+v for %+v", got, it)
			}
		})
	}
}

// Each refusal: the usual ErrRefused answer, counted by reason, and
// nothing reaches the owner.
func TestValidator_refusesBadConcurrencyReserveAndOps(t *testing.T) {
	const now = int64(1_700_000_000_000_000_000)
	op := func(kind decide.OpKind, mutate func(*Item), keys ...string) Item {
		it := opOn(now, kind, keys...)
		if mutate != nil {
			mutate(&it)
		}
		return it
	}
	for _, tc := range []struct {
		name, reason string
		it           Item
	}{
		{"op of cost 1", "shape", op(decide.OpRelease, func(it *Item) { it.Cost = 1 }, jobsKey)},
		{"op of kind 0", "shape", op(0, nil, jobsKey)},
		{"op of kind 4", "shape", op(decide.OpSettle+1, nil, jobsKey)},
		{"op of zero id", "shape", op(decide.OpRelease, func(it *Item) { it.Op.ID = [16]byte{} }, jobsKey)},
		{"renew of negative ttl", "shape", op(decide.OpRenew, func(it *Item) { it.Op.TTL = -1 }, jobsKey)},
		{"renew beyond MaxTTL", "shape", op(decide.OpRenew, func(it *Item) { it.Op.TTL = permit.MaxTTL + 1 }, jobsKey)},
		{"settle of negative actual", "shape", op(decide.OpSettle, func(it *Item) { it.Op.Actual = -1 }, callsKey)},
		{"settle beyond MaxSpan", "shape", op(decide.OpSettle, func(it *Item) { it.Op.Actual = math.MaxInt64 }, callsKey)},
		{"op with reserve", "shape", op(decide.OpSettle, func(it *Item) { it.Reserve = true }, callsKey)},
		{"op in debt", "shape", op(decide.OpRelease, func(it *Item) { it.Debt = true }, jobsKey)},
		{"strict op", "shape", op(decide.OpRelease, func(it *Item) { it.Strict = true }, jobsKey)},
		{"op on a key the policy does not know", "kind", op(decide.OpSettle, nil, otherKey)},
		{"settle of a concurrency key", "kind", op(decide.OpSettle, nil, callsKey, jobsKey)},
		{"settle of a strict key", "kind", op(decide.OpSettle, nil, strictKey)},
		{"release of a rate key", "kind", op(decide.OpRelease, nil, jobsKey, callsKey)},
		{"renew of a rate key", "kind", op(decide.OpRenew, nil, callsKey)},
		{"reserve on a strict key", "kind", func() Item { it := kindItem(now, strictKey); it.Reserve, it.Strict = true, true; return it }()},
		{"strict reserve", "kind", func() Item { it := kindItem(now, callsKey); it.Reserve, it.Strict = true, true; return it }()},
		{"reserve in debt", "kind", func() Item { it := kindItem(now, callsKey); it.Reserve, it.Debt = true, true; return it }()},
		{"concurrency key in debt", "kind", func() Item { it := kindItem(now, jobsKey); it.Debt = true; return it }()},
		{"concurrency key in a strict item", "kind", func() Item { it := kindItem(now, jobsKey, callsKey); it.Strict = true; return it }()},
		{"decision of cost 0", "shape", func() Item { it := kindItem(now, jobsKey); it.Cost = 0; return it }()},
		{"op of another group's key", "group", op(decide.OpRelease, func(it *Item) { it.Group = "t2" }, jobsKey)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, h, reg := newKindValidator(t, now)
			rs := v.HandleDecide(t.Context(), "n2", []Item{tc.it})
			if !errors.Is(rs[0].Err, ErrRefused) || rs[0].Reason != ReasonRefused || len(h.items) != 0 {
				t.Fatalf("answer %+v, %d items passed; want a refusal", rs[0], len(h.items))
			}
			if got := metrictest.Value(t, reg, "weir_peer_items_refused_total", "reason", tc.reason); got != 1 {
				t.Fatalf("refusals for %s: %v (%v)", tc.reason, got, rs[0].Err)
			}
		})
	}
}

// A concurrency key's numbers are a permit bound, checked as one: a key
// the policy cannot give numbers for (unknown tenant shapes) is held to
// [1, permit.MaxInFlight] permits of [1s, permit.MaxTTL].
func TestCheckPermitParams(t *testing.T) {
	for _, tc := range []struct {
		l  gcra.Limit
		ok bool
	}{
		{gcra.Limit{Burst: 1, Interval: 1e9}, true},
		{gcra.Limit{Burst: permit.MaxInFlight, Interval: permit.MaxTTL}, true},
		{gcra.Limit{Burst: 0, Interval: 1e9}, false},
		{gcra.Limit{Burst: permit.MaxInFlight + 1, Interval: 1e9}, false},
		{gcra.Limit{Burst: 1, Interval: 1e9 - 1}, false},
		{gcra.Limit{Burst: 1, Interval: permit.MaxTTL + 1}, false},
	} {
		if err := policy.CheckPermitParams(tc.l); (err == nil) != tc.ok {
			t.Errorf("policy.CheckPermitParams(%+v) = %v", tc.l, err)
		}
	}
	// The owner's own numbers for the concurrency key are a 5 x 30s bound
	// (a rate check would pass them too); a sender's differing ones are
	// replaced.
	const now = int64(1_700_000_000_000_000_000)
	v, h, _ := newKindValidator(t, now)
	it := kindItem(now, jobsKey)
	it.Limits[0] = gcra.Limit{Burst: 9999, Interval: 1}
	if rs := v.HandleDecide(t.Context(), "n2", []Item{it}); rs[0].Err != nil || h.items[0].Limits[0] != jobsLimit {
		t.Fatalf("%v; passed %+v", rs[0].Err, h.items)
	}
	if strings.Contains(kindPolicy, "kind:") {
		t.Fatal("kindPolicy should not need kind: concurrency")
	}
}

// Op and Reserve items cross the real peer wire into the Validator.
func TestValidator_opOverTheWire(t *testing.T) {
	const now = int64(1_700_000_000_000_000_000)
	v, h, _ := newKindValidator(t, now)
	addr := startServer(t, v)
	c, _ := newClient(t, nil)
	it := opOn(now, decide.OpRenew, jobsKey)
	it.Op.TTL = 5e9
	res, err := c.Decide(t.Context(), addr, it)
	if err != nil || res.Err != nil || len(h.items) != 1 || *h.items[0].Op != *it.Op || !h.items[0].Def(0).Concurrency {
		t.Fatalf("%+v, %v; passed %+v", res, err, h.items)
	}
	bad := opOn(now, decide.OpRenew, callsKey)
	if res, err := c.Decide(t.Context(), addr, bad); err != nil || !strings.Contains(res.Err.Error(), "refused") || len(h.items) != 1 {
		t.Fatalf("renew of a rate key: %+v, %v", res, err)
	}
}
