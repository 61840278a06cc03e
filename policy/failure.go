package policy

import "github.com/weirhq/weir/gcra"

// FallbackLimit is the local limit m falls back to when its decider cannot
// be reached and m.Limit.OnFailure is FailLocal: the policy's fallback_rate
// and fallback_burst when it gives them, otherwise this node's share of the
// tenant's effective limit among members nodes (see SharedLimit). Only
// meaningful for FailLocal limits.
func (m Match) FallbackLimit(members int) gcra.Limit {
	if !m.Limit.SharedFallback {
		return m.Limit.Fallback
	}
	return SharedLimit(m.Params, members)
}

// SharedLimit is one node's share of l among members nodes: the rate
// divided by members (the interval multiplied) and the burst divided by
// members, rounded up so that every node keeps at least one unit. members
// below 1 counts as 1, which returns l itself. The N shares together admit
// at most B + N - 1 units at once and N/(N*T) = 1/T per nanosecond, so a
// fault in which every node falls back costs at most about one more limit.
// A share whose span would exceed gcra.MaxSpan keeps the largest interval
// that fits (a slightly faster share, only for limits spanning years).
func SharedLimit(l gcra.Limit, members int) gcra.Limit {
	n := int64(max(members, 1))
	share := gcra.Limit{Interval: l.Interval * n, Burst: (l.Burst + n - 1) / n}
	if share.Interval > gcra.MaxSpan/share.Burst || share.Interval/n != l.Interval {
		share.Interval = gcra.MaxSpan / share.Burst
	}
	return share
}

// checkGlobalOpen refuses on_failure: open on a scope: global limit. A
// global limit promises one budget for every region together, and its
// other failure modes keep that promise (local falls back to the region's
// guaranteed part of the limit, closed denies); open would admit without
// bound in any region whose owner or Redis fails, on top of what the other
// regions admit. The refusal does not depend on whether the node shares
// the limit with other regions: a policy file is valid or not on its own
// (`weir policy check` knows no node flags), and without regions a global
// limit is enforced like a regional one, so scope: region says the same.
func checkGlobalOpen(c *checker, at string, l *Limit) {
	if l.Scope == ScopeGlobal && l.OnFailure == FailOpen && !l.Envoy.Unlimited {
		c.addf(at, "on_failure: open cannot be used on a scope: global limit: a fault in one region would admit without bound beyond the budget all regions share; use local (falls back to the region's floor) or closed, or scope: region")
	}
}

// checkConsistency refuses limits that one request could have decided in
// two places. A request whose enforced limits include a strict one is
// decided whole by Redis, while a request matching only fast limits is
// decided in the owner's memory; a fast key reached both ways would then be
// counted in two stores, each admitting its full burst.
//
// The rule: a fast limit and a strict limit must not share a group
// descriptor. Match sets never keep two limits apart (a request may carry
// every descriptor of both), so any two limits with the same group
// descriptor are matched together by some request and decided as one
// composite. Limits whose group descriptors differ form one composite only
// when a request gives both descriptors the same value; the limiter refuses
// such a request as invalid (as it refuses one that gives them different
// values: a composite needs one group), so the policy need not.
// Shadow settings are ignored here: tiers and overrides can turn shadow
// mode off per tenant.
func checkConsistency(c *checker, p *Policy) {
	for i, a := range p.Limits {
		for _, b := range p.Limits[i+1:] {
			if a.Consistency == b.Consistency || a.Group != b.Group || a.Group == "" ||
				a.Kind == KindConcurrency || b.Kind == KindConcurrency { // checkConcurrencyGroups
				continue
			}
			fast, strict := a, b
			if a.Consistency == ConsistencyStrict {
				fast, strict = b, a
			}
			c.addf("limits", "%q (consistency fast) and %q (consistency strict) share group %q: a request matching both would decide %q's keys in Redis while other requests decide them in owner memory; make both fast or both strict, or give them different groups",
				fast.Name, strict.Name, a.Group, fast.Name)
		}
	}
}
