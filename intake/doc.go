// Package intake is what an owner accepts from the peer plane: its
// Validator checks every forwarded item and lease refresh as strictly as
// the public API checks a request, against the owner's own clock and
// policy, before the owner (package owner) sees it. Validation is the
// owner's job, not the transport's, so package peer imports neither the
// limiter nor the policy.
//
// For each key the Validator resolves the key against the owner's policy
// once (policy.KeyLimit): it replaces the sender's numbers with the
// policy's where the policy determines them, refuses numbers the policy
// never gives, and fills the item's Defs (decide.Request.Defs: the limit's
// name, scope, consistency, lease terms) from it, so the owner's lease,
// region and debt code read Defs and never parse a key. For a lease
// refresh it replaces the sender's lease terms and limit name with the
// policy's, so no sender can ask for more per grant or for longer.
//
// Concurrency limits, reservations and token operations (issue 26): an
// item with Op (a Release, Renew or Settle of a token) must have cost 0
// (an item without Op, cost > 0 as before), a valid kind, a non-zero id,
// a TTL in [0, permit.MaxTTL] and an Actual in [0, gcra.MaxSpan], and
// keys that all resolve in the owner's policy: a Settle's fast rate keys,
// a Release's or Renew's concurrency keys. Reserve is refused on strict
// or debt items and beside strict or global keys; a concurrency key is
// refused in a strict or debt item. A concurrency key's numbers are its
// permit bound (decide.PermitLimit) and are checked as one. The Defs it
// fills say which keys are concurrency keys (decide.Def.Concurrency,
// from the policy's Def). Refusals are counted under reason "kind" (and
// "shape" for an op's own fields).
//
// Usage (cmd/node wires it on the peer server):
//
//	v, _ := intake.NewValidator(intake.DefaultValidatorConfig(), o, policies, nowNanos, reg)
//	peer.Register(peerGRPCServer, v, peer.WithRegion(link))
//
// The caller's duties: give it the clock the owner's requests are stamped
// with (the TATs' time base) and the policy source the node decides with.
//
// Concurrency: a Validator is safe for concurrent use; it keeps no state
// beyond its metrics and calls its inner handler once per batch, on the
// caller's goroutine.
package intake
