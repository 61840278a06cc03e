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
