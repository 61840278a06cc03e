package cluster

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/memstore"
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
