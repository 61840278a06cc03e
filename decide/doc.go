// Package decide holds the one request type of a composite decision, from
// the limiter through the forwarding layer and across the peer plane to
// the owner that decides it, and the route computed once per request.
//
// A Request carries, per key, the limit's numbers (Limits, after tier and
// tenant) and its identity (Defs: name, scope, consistency, shadow, lease
// terms), built once when the policy is compiled and reached through
// policy.Match, so no layer parses a key string back into its limit. The
// peer wire carries keys and numbers only: an owner that receives a
// forwarded Request resolves each untrusted key against its own policy once
// (owner.Validator) and fills Defs from it.
//
// Usage (the limiter builds requests; stores decide them):
//
//	r := &decide.Request{Group: m.GroupValue, Cost: 1, Now: now,
//		Keys: []string{m.Key}, Limits: []gcra.Limit{m.Params}, Defs: []*decide.Def{m.Limit.Def()}}
//	agg, err := store.Decide(ctx, r, out) // store: limiter.Store (forward.Router)
//
// The caller's duties: Keys, Limits and Defs pair up by index (Defs may be
// empty for a request that crossed the wire and was not validated yet,
// and then no limit counts as global or leasable); Now is stamped once, by
// the node that received the request. A Request
// is a value with slices: whoever keeps it past the call it was passed to
// copies the slices (Clone). Nothing here is safe for concurrent writes;
// a Def is immutable once built and shared freely.
package decide
