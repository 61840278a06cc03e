// Package cluster makes a set of weir nodes decide as one: every group (a
// limit key's hash tag, usually the tenant) has one owner node, chosen by
// the consistent-hash ring, and only the owner decides its keys.
//
// A Cluster is the limiter's Store. For a request whose group this node
// owns it decides locally; otherwise it forwards the resolved decision (keys,
// GCRA parameters, cost, and the time the receiving node stamped) to the
// owner through a peer.Forwarder. An owner that no longer owns a group says
// so and names the owner it believes in; the sender retries there once. An
// owner that cannot be reached yields an *limiter.UnavailableError, so the
// limiter applies the limits' failure policy and flags the decision. A slow
// owner is not an unreachable one: a forward waits until its caller's
// deadline less a reserve (ForwardConfig), and only refused connections and
// timeouts of the owner's own latency budget count against its breaker
// (forward.go).
//
// Owners decide `fast` limits in memory (memstore) and persist every changed
// TAT to Redis write-behind; before its first decision on a key an owner
// loads the key's TAT from Redis, so a group that moves (join, leave, crash)
// keeps its state. `strict` limits are decided by the Redis script, with
// concurrent strict requests coalesced into one pipeline. With no Redis,
// everything is decided in owner memory and a moved group starts rested.
//
// Usage (cmd/node wires this):
//
//	c, _ := cluster.New(cfg, cluster.Deps{Ring: r, Forwarder: pc, Mem: mem, Redis: b, WriteBehind: wb}, logger, reg)
//	peer.Register(grpcServer, c)             // owners answer forwarded work
//	lim, _ := limiter.New(..., c, ...)       // the limiter decides through it
//	for range membership.Changes() { c.SetMembersFailed(ctx, membersFromGossip(), membership.Failed()) }
//	...
//	c.Handoff(ctx) // on leave: flush every TAT before going
//
// Units a node admits by fallback while an owner cannot decide are fallback
// debt: the node records them per key and, once the owner answers again,
// sends them to it, and the owner charges them to the keys' TATs (never
// past a fully spent key), so a fault shifts admissions in time instead of
// adding them (debt.go; docs/operations.md, "Fallback allowance").
//
// Run c.RunHeartbeat(ctx) for the life of the node: it finds freezes and
// reloads state after one, off the request path.
//
// Cluster is safe for concurrent use. It starts one goroutine per strict
// batch in flight and one per owner whose debts are being sent, and none
// otherwise; each ends on its own within a second.
package cluster
