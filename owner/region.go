package owner

import (
	"slices"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
)

// Regions shares the budgets of scope: global limits between regions
// (*regionlink.Link); see Deps.Regions and regionlink.Link.Enforce. defs
// are the keys' limits' identities (decide.Request.Defs): a key is global
// when its Def says so. Safe for concurrent use.
type Regions interface {
	Enforce(epoch uint64, group string, keys []string, defs []*decide.Def, limits []gcra.Limit, cost, now int64,
		rescale func(key string, f func(tat int64) int64)) (out []gcra.Limit, ok bool, release func())
	// StrictLimits returns a copy of limits with each global key's limit
	// cut to a fixed part of it: a strict key's TAT lives in Redis, where
	// it cannot be rescaled with a share that moves.
	StrictLimits(keys []string, defs []*decide.Def, limits []gcra.Limit) (out []gcra.Limit, ok bool)
}

// regionLimits returns the limits to decide r at as its owner at epoch:
// r.Limits, or this region's shares of them for global keys, with their
// TATs rescaled in memory when a share changed. ok is false when a global
// key's share admits nothing. Call release after the decision is stored.
func (o *Owner) regionLimits(epoch uint64, r *decide.Request) (limits []gcra.Limit, ok bool, release func()) {
	if o.deps.Regions == nil {
		return r.Limits, true, func() {}
	}
	return o.deps.Regions.Enforce(epoch, r.Group, r.Keys, r.Defs, r.Limits, r.Cost, r.Now, func(key string, f func(int64) int64) {
		// A key dropped since epoch, or one with no room, is left alone:
		// the decision that follows refuses it the same way.
		_ = o.deps.Mem.UpdateAt(epoch, r.Group, key, r.Now, func(tat int64, _ bool) (int64, error) { return f(tat), nil })
	})
}

// strictRegionLimits is regionLimits for a strict r: a copy of its limits,
// global keys cut to their region's fixed part.
func (o *Owner) strictRegionLimits(r *decide.Request) ([]gcra.Limit, bool) {
	if o.deps.Regions == nil {
		return slices.Clone(r.Limits), true
	}
	return o.deps.Regions.StrictLimits(r.Keys, r.Defs, r.Limits)
}

// shareDenied is the answer when a global key's regional share admits
// nothing (its part of the burst rounds down to zero): every limit denies,
// nothing changes, and the caller may retry after one of its intervals.
func (o *Owner) shareDenied(r *decide.Request, out []gcra.Result) gcra.Result {
	var agg gcra.Result
	for i, k := range r.Keys {
		out[i] = gcra.Result{TAT: o.deps.Mem.Get(r.Group, k), RetryAfter: r.Limits[i].Interval}
		agg.RetryAfter = max(agg.RetryAfter, out[i].RetryAfter)
	}
	return agg
}
