package intake

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/metrictest"
	"github.com/weirhq/weir/policy"
)

// memHandler decides items in a memstore, as an owner does.
type memHandler struct{ s *memstore.Store }

func (h memHandler) HandleDecide(ctx context.Context, _ string, items []Item) []Result {
	out := make([]Result, len(items))
	for i, it := range items {
		rs := make([]gcra.Result, len(it.Keys))
		agg, err := h.s.Decide(ctx, it.Group, it.Keys, it.Limits, it.Cost, it.Now, rs)
		out[i] = Result{Overall: agg, Results: rs, Err: err}
	}
	return out
}

type staticPolicy struct{ p *policy.Policy }

func (s staticPolicy) Current() *policy.Policy { return s.p }

// validatorFixture serves a Validator over a memstore-backed owner on a real
// gRPC server, with the built-in policy and a fixed owner clock.
type validatorFixture struct {
	mem *memstore.Store
	reg *prometheus.Registry
	c   *Client
	adr string
	now int64
}

func newValidatorFixture(t *testing.T) *validatorFixture {
	t.Helper()
	f := &validatorFixture{mem: memstore.New(memstore.DefaultConfig()), reg: prometheus.NewRegistry(), now: 1_700_000_000_000_000_000}
	v, err := NewValidator(DefaultValidatorConfig(), memHandler{f.mem}, staticPolicy{policy.Builtin()}, func() int64 { return f.now }, f.reg)
	if err != nil {
		t.Fatal(err)
	}
	f.adr = startServer(t, v)
	f.c, _ = newClient(t, nil)
	return f
}

// userItem is a valid forward for the built-in per-user limit (5/s burst 3)
// of tenant t1.
func (f *validatorFixture) userItem() Item {
	return Item{
		Group: "t1", Keys: []string{"weir:{t1}:per-user:t1:u1"},
		Limits: []gcra.Limit{{Interval: 200_000_000, Burst: 3}}, Cost: 1, Now: f.now,
	}
}

// A forged now, out-of-range numbers or a key of another group are refused
// and leave the key's state as it was.
func TestValidator_refusesForgedItems(t *testing.T) {
	f := newValidatorFixture(t)
	ok := f.userItem()
	res, err := f.c.Decide(t.Context(), f.adr, ok)
	if err != nil || res.Err != nil || !res.Overall.Allowed {
		t.Fatalf("valid item: %+v, %v", res, err)
	}
	const key, unknownKey = "weir:{t1}:per-user:t1:u1", "weir:{t1}:not-in-policy:t1"
	before := f.mem.Get("t1", key)
	if before != f.now+200_000_000 {
		t.Fatalf("TAT after one request = %d, want %d", before, f.now+200_000_000)
	}
	year := int64(365 * 24 * time.Hour)
	for name, mutate := range map[string]func(*Item){
		"now 10 years ahead": func(it *Item) { it.Now += 10 * year },
		"now near int64 max": func(it *Item) { it.Now = math.MaxInt64 - 5 },
		"now far behind":     func(it *Item) { it.Now = 1 },
		"now 3 s ahead":      func(it *Item) { it.Now += int64(3 * time.Second) },
		"huge interval, limit unknown to the owner": func(it *Item) {
			it.Keys[0], it.Limits[0].Interval = unknownKey, 1<<50
		},
		"span beyond policy.MaxSpan, limit unknown to the owner": func(it *Item) {
			it.Keys[0], it.Limits[0] = unknownKey, gcra.Limit{Interval: policy.MaxInterval, Burst: 1000}
		},
		"zero interval, limit unknown to the owner": func(it *Item) {
			it.Keys[0], it.Limits[0].Interval = unknownKey, 0
		},
		"zero cost":           func(it *Item) { it.Cost = 0 },
		"huge cost":           func(it *Item) { it.Cost = 1 << 40 },
		"no keys":             func(it *Item) { it.Keys, it.Limits = nil, nil },
		"keys without limits": func(it *Item) { it.Limits = nil },
		"repeated key": func(it *Item) {
			it.Keys, it.Limits = []string{it.Keys[0], it.Keys[0]}, []gcra.Limit{it.Limits[0], it.Limits[0]}
		},
		"key of another group": func(it *Item) {
			it.Group = "t2" // routed as t2, but the key is t1's
		},
		"huge key": func(it *Item) { it.Keys[0] = "weir:{t1}:" + strings.Repeat("x", DefaultMaxKeyBytes) },
	} {
		t.Run(name, func(t *testing.T) {
			it := f.userItem()
			it.Keys, it.Limits = append([]string(nil), it.Keys...), append([]gcra.Limit(nil), it.Limits...)
			mutate(&it)
			res, err := f.c.Decide(t.Context(), f.adr, it)
			if err != nil {
				t.Fatalf("transport error %v; want a per-item refusal", err)
			}
			if res.Err == nil || res.Reason != ReasonRefused || !strings.Contains(res.Err.Error(), "refused") {
				t.Fatalf("answer %+v; want a refusal", res)
			}
			if got := f.mem.Get("t1", key); got != before || f.mem.Has("t1", unknownKey) {
				t.Fatalf("state changed: TAT moved from %d to %d, or %s is held", before, got, unknownKey)
			}
		})
	}
	for _, reason := range []string{"skew", "params", "shape", "group"} {
		if metrictest.Value(t, f.reg, "weir_peer_items_refused_total", "reason", reason) == 0 {
			t.Errorf("no refusal counted for reason %s", reason)
		}
	}
}

// The owner decides with its own numbers where its policy knows the key:
// a sender claiming a burst of 1000 for a burst-3 limit gets 3, and a huge
// interval cannot lock the key.
func TestValidator_decidesWithOwnerParams(t *testing.T) {
	f := newValidatorFixture(t)
	it := f.userItem()
	it.Limits = []gcra.Limit{{Interval: 1 << 50, Burst: 1}}
	res, err := f.c.Decide(t.Context(), f.adr, it)
	if err != nil || res.Err != nil || !res.Overall.Allowed || res.Results[0].TAT != f.now+200_000_000 {
		t.Fatalf("huge interval: %+v, %v; want a decision with the owner's 200ms interval", res, err)
	}
	it.Limits = []gcra.Limit{{Interval: 1, Burst: 1000}}
	allowed := 1
	for range 10 {
		res, err := f.c.Decide(t.Context(), f.adr, it)
		if err != nil || res.Err != nil {
			t.Fatalf("%+v, %v", res, err)
		}
		if res.Overall.Allowed {
			allowed++
		}
	}
	if allowed != 3 {
		t.Fatalf("%d of 10 allowed at one instant; the owner's burst is 3", allowed)
	}
	if got := metrictest.Value(t, f.reg, "weir_peer_params_replaced_total"); got != 11 {
		t.Fatalf("replaced = %v, want 11", got)
	}
}

// A batch mixing refused and valid items answers each in its place.
func TestValidator_mixedBatchInOrder(t *testing.T) {
	mem := memstore.New(memstore.DefaultConfig())
	now := int64(1_000_000_000)
	v, err := NewValidator(ValidatorConfig{}, memHandler{mem}, staticPolicy{policy.Builtin()}, func() int64 { return now }, nil)
	if err != nil {
		t.Fatal(err)
	}
	good := Item{Group: "t1", Keys: []string{"weir:{t1}:per-tenant:t1"}, Limits: []gcra.Limit{{Interval: 10_000, Burst: 50}}, Cost: 1, Now: now}
	bad := good
	bad.Now = now + int64(time.Hour)
	rs := v.HandleDecide(t.Context(), "x", []Item{bad, good, bad})
	if len(rs) != 3 || !errors.Is(rs[0].Err, ErrRefused) || rs[1].Err != nil || !rs[1].Overall.Allowed || !errors.Is(rs[2].Err, ErrRefused) {
		t.Fatalf("results %+v", rs)
	}
}

func TestValidatorConfig_Validate(t *testing.T) {
	if err := DefaultValidatorConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []ValidatorConfig{{MaxSkew: -1}, {MaxKeys: -1}, {MaxKeyBytes: -1}} {
		if c.Validate() == nil {
			t.Errorf("%+v passed", c)
		}
	}
}
