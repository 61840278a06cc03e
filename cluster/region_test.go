package cluster

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/peer"
	"github.com/weirhq/weir/peer/peertest"
	"github.com/weirhq/weir/ring"
)

// fakeRegions enforces limit for every key, rescales with f, and records
// whether its stripe was released.
type fakeRegions struct {
	limit    gcra.Limit
	ok       bool
	f        func(tat int64) int64
	released int
}

func (r *fakeRegions) Enforce(_ uint64, _ string, keys []string, _ []gcra.Limit, _, _ int64,
	rescale func(string, func(int64) int64)) ([]gcra.Limit, bool, func()) {
	out := make([]gcra.Limit, len(keys))
	for i, k := range keys {
		out[i] = r.limit
		if r.f != nil {
			rescale(k, r.f)
		}
	}
	return out, r.ok, func() { r.released++ }
}

func (r *fakeRegions) StrictLimits(keys []string, _ []gcra.Limit) ([]gcra.Limit, bool) {
	out := make([]gcra.Limit, len(keys))
	for i := range out {
		out[i] = r.limit
	}
	return out, r.ok
}

func newRegionCluster(t *testing.T, regions Regions) (*Cluster, *memstore.Store) {
	t.Helper()
	rg, err := ring.New(ring.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	mem := memstore.New(memstore.DefaultConfig())
	cfg := DefaultConfig()
	cfg.LocalName = "a"
	c, err := New(cfg, Deps{Ring: rg, Forwarder: peertest.NewNetwork().Forwarder("a"), Mem: mem, Regions: regions}, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	c.SetMembers(context.Background(), map[string]string{"a": "a"})
	return c, mem
}

func TestCluster_Decide_globalKeysDecideAtTheRegionsShare(t *testing.T) {
	const now = int64(1_000_000_000_000)
	whole := gcra.Limit{Interval: 1_000_000, Burst: 100} // 1,000/s
	share := gcra.Limit{Interval: 10_000_000, Burst: 10} // a tenth of it
	regions := &fakeRegions{limit: share, ok: true, f: func(tat int64) int64 { return max(tat, now) + 3*share.Interval }}
	c, mem := newRegionCluster(t, regions)
	r := &limiter.StoreRequest{Group: "g", Keys: []string{"k"}, Limits: []gcra.Limit{whole}, Cost: 1, Now: now}
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

func TestCluster_Decide_emptyShareDeniesAndChangesNothing(t *testing.T) {
	const now = int64(1_000_000_000_000)
	whole := gcra.Limit{Interval: 1_000_000, Burst: 100}
	regions := &fakeRegions{ok: false}
	c, mem := newRegionCluster(t, regions)
	mem.Put("g", "k", now+5)
	r := &limiter.StoreRequest{Group: "g", Keys: []string{"k"}, Limits: []gcra.Limit{whole}, Cost: 1, Now: now}
	out := make([]gcra.Result, 1)
	agg, err := c.Decide(context.Background(), r, out)
	if err != nil || agg.Allowed || agg.RetryAfter != whole.Interval || out[0].TAT != now+5 {
		t.Fatalf("decide: %+v %+v, %v; want denied, retry after %d, TAT kept", agg, out[0], err, whole.Interval)
	}
	if mem.Get("g", "k") != now+5 || regions.released != 1 {
		t.Fatalf("TAT %d after an empty share (want %d), released %d", mem.Get("g", "k"), now+5, regions.released)
	}
}

// TestCluster_chargeDebt_globalKeyChargedAtTheRegionsShare: a global key
// decided at a tenth of its limit, half spent, has room for 5 units at its
// share (50 at the whole limit): a debt of 20 charges those 5 and forgives
// the rest, rather than failing to fit 20 at the share and forgiving all.
func TestCluster_chargeDebt_globalKeyChargedAtTheRegionsShare(t *testing.T) {
	const now = int64(1_000_000_000_000)
	whole := gcra.Limit{Interval: 1_000_000, Burst: 100} // 1,000/s
	share := gcra.Limit{Interval: 10_000_000, Burst: 10} // a tenth of it
	regions := &fakeRegions{limit: share, ok: true}
	c, mem := newRegionCluster(t, regions)
	mem.Put("g", "k", now+share.Span()/2)
	it := peer.Item{Group: "g", Keys: []string{"k"}, Limits: []gcra.Limit{whole}, Cost: 20, Now: now, Debt: true}
	res := c.chargeDebt(t.Context(), &it)
	if res.Err != nil || res.Overall.TAT != now+share.Span() || res.Overall.Remaining != 0 {
		t.Fatalf("after a debt of 20 on a share with 5 left: %+v, want spent with TAT = now + the share's span", res)
	}
	if ch, fg := testutil.ToFloat64(c.debtMetrics.units.WithLabelValues("charged")), testutil.ToFloat64(c.debtMetrics.units.WithLabelValues("forgiven")); ch != 5 || fg != 15 {
		t.Fatalf("charged %v, forgiven %v; want 5 and 15", ch, fg)
	}

	regions.ok = false // a share that admits nothing takes no debt
	mem.Put("g", "k2", now)
	it.Keys = []string{"k2"}
	if res := c.chargeDebt(t.Context(), &it); res.Err != nil || mem.Get("g", "k2") != now || res.Overall.Remaining != 0 {
		t.Fatalf("debt on an empty share: %+v, TAT %d; want nothing charged", res, mem.Get("g", "k2"))
	}
}
