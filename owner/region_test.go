package owner

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/metrictest"
)

// fakeRegions enforces limit for every key, rescales with f, and records
// whether its stripe was released.
type fakeRegions struct {
	limit    gcra.Limit
	ok       bool
	f        func(tat int64) int64
	released int
	defs     []*decide.Def // what the last call was given
}

func (r *fakeRegions) Enforce(_ uint64, _ string, keys []string, defs []*decide.Def, _ []gcra.Limit, _, _ int64,
	rescale func(string, func(int64) int64)) ([]gcra.Limit, bool, func()) {
	r.defs = defs
	out := make([]gcra.Limit, len(keys))
	for i, k := range keys {
		out[i] = r.limit
		if r.f != nil {
			rescale(k, r.f)
		}
	}
	return out, r.ok, func() { r.released++ }
}

func (r *fakeRegions) StrictLimits(keys []string, defs []*decide.Def, _ []gcra.Limit) ([]gcra.Limit, bool) {
	r.defs = defs
	out := make([]gcra.Limit, len(keys))
	for i := range out {
		out[i] = r.limit
	}
	return out, r.ok
}

// fixedRing owns every group at one node.
type fixedRing string

func (r fixedRing) Owner(string) string { return string(r) }

func newRegionOwner(t *testing.T, regions Regions) (*Owner, *memstore.Store, *prometheus.Registry) {
	t.Helper()
	mem := memstore.New(memstore.DefaultConfig())
	cfg := DefaultConfig()
	cfg.LocalName = "a"
	reg := prometheus.NewRegistry()
	o, err := New(cfg, Deps{Ring: fixedRing("a"), Mem: mem, Regions: regions}, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	return o, mem, reg
}

func TestOwner_Decide_globalKeysDecideAtTheRegionsShare(t *testing.T) {
	const now = int64(1_000_000_000_000)
	whole := gcra.Limit{Interval: 1_000_000, Burst: 100} // 1,000/s
	share := gcra.Limit{Interval: 10_000_000, Burst: 10} // a tenth of it
	regions := &fakeRegions{limit: share, ok: true, f: func(tat int64) int64 { return max(tat, now) + 3*share.Interval }}
	c, mem, _ := newRegionOwner(t, regions)
	r := &decide.Request{Group: "g", Keys: []string{"k"}, Limits: []gcra.Limit{whole}, Cost: 1, Now: now}
	out := make([]gcra.Result, 1)
	agg, err := c.Decide(context.Background(), r, out)
	if err != nil || !agg.Allowed {
		t.Fatalf("decide: %+v, %v", agg, err)
	}
	// Rescaled to 3 units of debt, then one unit at the share's interval:
	// 6 units left of its burst of 10 (of 100 for the whole limit).
	if got := mem.Get("g", "k"); got != now+4*share.Interval || out[0].Remaining != 6 {
		t.Fatalf("TAT %d (want %d), remaining %d (want 6)", got, now+4*share.Interval, out[0].Remaining)
	}
	if r.Limits[0] != whole || regions.released != 1 {
		t.Fatalf("request limits %+v (must be left alone), released %d times", r.Limits[0], regions.released)
	}
}

func TestOwner_Decide_emptyShareDeniesAndChangesNothing(t *testing.T) {
	const now = int64(1_000_000_000_000)
	whole := gcra.Limit{Interval: 1_000_000, Burst: 100}
	regions := &fakeRegions{ok: false}
	c, mem, _ := newRegionOwner(t, regions)
	mem.Put("g", "k", now+5)
	r := &decide.Request{Group: "g", Keys: []string{"k"}, Limits: []gcra.Limit{whole}, Cost: 1, Now: now}
	out := make([]gcra.Result, 1)
	agg, err := c.Decide(context.Background(), r, out)
	if err != nil || agg.Allowed || agg.RetryAfter != whole.Interval || out[0].TAT != now+5 {
		t.Fatalf("decide: %+v %+v, %v; want denied, retry after %d, TAT kept", agg, out[0], err, whole.Interval)
	}
	if mem.Get("g", "k") != now+5 || regions.released != 1 {
		t.Fatalf("TAT %d after an empty share (want %d), released %d", mem.Get("g", "k"), now+5, regions.released)
	}
}

// TestOwner_ChargeDebt_globalKeyChargedAtTheRegionsShare: a global key
// decided at a tenth of its limit, half spent, has room for 5 units at its
// share (50 at the whole limit): a debt of 20 charges those 5 and forgives
// the rest, rather than failing to fit 20 at the share and forgiving all.
func TestOwner_ChargeDebt_globalKeyChargedAtTheRegionsShare(t *testing.T) {
	const now = int64(1_000_000_000_000)
	whole := gcra.Limit{Interval: 1_000_000, Burst: 100} // 1,000/s
	share := gcra.Limit{Interval: 10_000_000, Burst: 10} // a tenth of it
	regions := &fakeRegions{limit: share, ok: true}
	c, mem, reg := newRegionOwner(t, regions)
	mem.Put("g", "k", now+share.Span()/2)
	it := decide.Request{Group: "g", Keys: []string{"k"}, Limits: []gcra.Limit{whole}, Cost: 20, Now: now, Debt: true}
	res := c.ChargeDebt(t.Context(), &it)
	if res.Err != nil || res.Overall.TAT != now+share.Span() || res.Overall.Remaining != 0 {
		t.Fatalf("after a debt of 20 on a share with 5 left: %+v, want spent with TAT = now + the share's span", res)
	}
	if ch, fg := debtUnits(t, reg, "charged"), debtUnits(t, reg, "forgiven"); ch != 5 || fg != 15 {
		t.Fatalf("charged %v, forgiven %v; want 5 and 15", ch, fg)
	}

	regions.ok = false // a share that admits nothing takes no debt
	mem.Put("g", "k2", now)
	it.Keys = []string{"k2"}
	if res := c.ChargeDebt(t.Context(), &it); res.Err != nil || mem.Get("g", "k2") != now || res.Overall.Remaining != 0 {
		t.Fatalf("debt on an empty share: %+v, TAT %d; want nothing charged", res, mem.Get("g", "k2"))
	}
}

// The owner hands the region link the request's Defs, as the limiter (or
// the Validator, for forwarded work) filled them: the link decides which
// keys are global from them, never from the keys.
func TestOwner_Decide_regionsSeeTheRequestsDefs(t *testing.T) {
	const now = int64(1_000_000_000_000)
	whole := gcra.Limit{Interval: 1_000_000, Burst: 100}
	regions := &fakeRegions{limit: whole, ok: true}
	c, _, _ := newRegionOwner(t, regions)
	defs := []*decide.Def{{Name: "world", Global: true}}
	r := &decide.Request{Group: "g", Keys: []string{"k"}, Limits: []gcra.Limit{whole}, Defs: defs, Cost: 1, Now: now}
	if _, err := c.Decide(context.Background(), r, make([]gcra.Result, 1)); err != nil {
		t.Fatal(err)
	}
	if len(regions.defs) != 1 || regions.defs[0] != defs[0] {
		t.Fatalf("regions saw defs %v, want the request's %v", regions.defs, defs)
	}
}

// debtUnits reads weir_fallback_debt_units_total{event} from reg.
func debtUnits(t *testing.T, reg *prometheus.Registry, event string) float64 {
	t.Helper()
	return metrictest.Value(t, reg, "weir_fallback_debt_units_total", "event", event)
}
