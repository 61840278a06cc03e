// Package forward makes a set of weir nodes decide as one: it routes every
// request to its group's owner (a group is a limit key's hash tag, usually
// the tenant; the consistent-hash ring names one owner per group) and
// holds no key state of its own beyond the fallback debt it owes.
//
// A Router is the limiter's Store. It computes the request's Route once
// (Routes.Route: owner, address, ring epoch) and passes it down: to the
// owner side (package owner) when this node owns the group, to the lease
// holder (package leaselink) when the request can be decided from leases,
// and otherwise to the owner node through a peer.Forwarder, with the
// stamped time. An owner that no longer owns a group says so and names the
// owner it believes in; the Router retries there once. An owner that
// cannot be reached yields an *limiter.UnavailableError, so the limiter
// applies the limits' failure policy and flags the decision. A slow owner
// is not an unreachable one: a forward waits until its caller's deadline
// less a reserve (ForwardConfig), and only refused connections and
// timeouts of the owner's own latency budget count against its breaker
// (budget.go).
//
// Units a node admits by fallback while an owner cannot decide are fallback
// debt: the Router records them per key and, once the owner answers again,
// sends them to it (or to this node's owner side), and the owner charges
// them to the keys' TATs (never past a fully spent key), so a fault shifts
// admissions in time instead of adding them (debt.go; docs/operations.md,
// "Fallback allowance").
//
// Concurrency limits, reservations and token ops (issue 26) travel the
// same path. A request with an Op (Release, Renew or Settle of a token) is
// routed by its token's group like a decision, NotOwner retry and
// ownership_changing included. Requests with an Op, Reserve or a
// concurrency key (decide.Def.Concurrency) are never decided from leases,
// and the leases never learn from a concurrency key's or an op's answer.
// A forward carries Reserve and Op (never Defs or Grant); the owner's
// decide.Grant comes back in peer.Result.Grant and is copied into the
// caller's Request.Grant, if it set one, before Decide returns (for the
// groups this node owns, its owner fills Request.Grant itself). Fallback
// debt is never charged to a concurrency key: the limiter leaves those
// keys out of RecordFallback, and a debt an owner refuses is dropped.
//
// Retries: a forwarded Release, Renew or Settle that times out may have
// been applied by the owner; the caller may send it again, as ops are
// idempotent by id (a second one answers Done false). An acquire (a
// decision with concurrency keys) that times out after the owner
// committed it holds its slots until the permit's TTL, with no token at
// the caller: that is the caller's crash case, bounded by the TTL.
//
// Routes (the ring and the members' addresses) is built first and read by
// everything else: the owner's ownership recheck, the region link
// (regionlink.Owners) and the lease holder, so nothing is bound late.
//
// Usage (cmd/node wires this):
//
//	routes := forward.NewRoutes(name, ring)
//	o, _ := owner.New(ocfg, owner.Deps{Ring: routes, ...}, logger, reg)
//	r, _ := forward.New(forward.DefaultConfig(), forward.Deps{Routes: routes, Forwarder: peers, Owner: o, Leases: holder}, logger, reg)
//	lim, _ := limiter.New(..., r, ...)        // the limiter decides through it
//	go r.RunHeartbeat(ctx)                   // the owner's freeze detection
//	for range membership.Changes() { r.SetMembersFailed(ctx, membersFromGossip(), membership.Failed()) }
//	...
//	r.Handoff(ctx) // on leave: flush every TAT before going
//
// The caller's duties: call SetMembers (or SetMembersFailed) on every
// membership change and before the first decision; run RunHeartbeat for
// the life of the node; call Handoff before leaving.
//
// Concurrency: a Router is safe for concurrent use; decisions run on their
// callers' goroutines. Membership changes are serialised by one mutex. It
// starts one goroutine per owner whose debts are being sent, each ending
// within a second; RunHeartbeat is the caller's goroutine.
package forward
