// Package policy is weir's policy plane: rate limits as data. A policy is a
// YAML file listing limits — the descriptors each matches, the descriptor
// that groups its keys (the Redis Cluster hash tag and the owner-routing
// value), its kind (rate, or concurrency: requests in flight), rate and burst
// or max_in_flight and ttl, shadow mode, consistency, failure mode, leasing,
// reservations and scope — plus per-tier numbers and per-tenant tiers and
// overrides.
//
// Parse and LoadFile validate a policy whole: any problem refuses it, with
// messages that name the file, the limit and the field. A parsed *Policy is
// immutable and safe for concurrent use. Resolve turns a request's
// descriptors into the limits that apply, each with its storage key and its
// numbers after the tenant's tier and overrides. A Watcher serves the
// current policy of a file and replaces it when the file changes; an invalid
// new file is logged and counted, and the old policy keeps serving.
//
// Usage:
//
//	w, err := policy.NewWatcher(policy.WatcherConfig{Path: "/etc/weir/policy.yaml"}, logger, reg)
//	if err != nil {
//		return err // the initial file is missing or invalid
//	}
//	go w.Run(ctx) // follow the file until ctx is done
//
//	// per request:
//	p := w.Current()
//	matches, err := p.Resolve(req.Descriptors, matches[:0])
//	if errors.Is(err, policy.ErrUnknownDescriptor) {
//		// refuse the request: the caller sent a name no limit uses
//	}
//	for _, m := range matches {
//		// decide m.Key with m.Params; report, but do not enforce, m.Shadow
//	}
//
// The caller's duties:
//   - Load Current once per request and use that one policy for the whole
//     request, so a reload cannot split it between two versions.
//   - Use Match.Params and Match.Shadow, not the Limit's own numbers: only
//     the former include the tenant's tier and overrides.
//   - Bound the number and size of descriptors before calling Resolve; the
//     policy bounds only names it knows.
//   - Limits of one request may have different groups, and so different
//     hash slots and owners; deciding them together is the limiter's call.
//   - Call Reload on SIGHUP if operators expect it, and cancel Run's context
//     on shutdown. Use Static for a fixed policy (tests, built-in policy).
//
// Concurrency limits (issue 26): a limit with kind: concurrency bounds the
// permits held at once instead of a rate. It takes max_in_flight (1 to
// permit.MaxInFlight, required) and ttl (1s to 24h, default
// DefaultPermitTTL, 30s); tiers and overrides may set its max_in_flight.
// Its Params are the permit bound, Burst max_in_flight and Interval the ttl
// in nanoseconds (decide.PermitLimit), so Match.Params, Tenant, Tier and
// KeyLimit answer for it as for a rate limit, and its Def has Concurrency
// set. It is always fast and regional, never leased, never answers Envoy
// RLS, and fails closed unless it (or defaults) says open: an inherited
// on_failure: local makes it closed, a written one is refused. Check its
// numbers from elsewhere with CheckPermitParams, not CheckParams. Rate
// limits take reserve_ttl (1s to 24h; Limit.ReserveTTL and Def.ReserveTTL
// default to decide.DefaultReserveTTL), refused on strict and Envoy limits.
//
// The key format, stable across versions, is documented on Resolve; package
// limitkey builds and parses it (this package adds what needs a policy:
// LimitOfKey and ParamsForKey find the limit and numbers of a key).
package policy
