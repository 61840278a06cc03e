// Package routing is the shared map that lets a client send each request
// straight to its group's owner, skipping the forward hop between nodes.
//
// A node publishes its placement with the weir.v1 Topology RPC: ring
// members with their public gRPC addresses, the partition table, and the
// policy's group rules (which descriptor gives a request's group). Response
// builds that answer from the node's ring and membership; NewTable checks
// an answer on the client side and Table.Owner finds a request's owner from
// its descriptors alone, exactly as the node would (policy.Resolve gives the
// group, ring.Ring.Owner the owner).
//
// Routing is an optimisation, never a correctness requirement: every node
// decides every request, forwarding it to the owner when it is not one. A
// stale table therefore costs a forward hop, not a wrong answer. See
// docs/architecture.md, "Client routing".
//
// Usage, on a node:
//
//	resp := routing.Response(partitions, publicAddrs, rules, policyVersion)
//
// and in a client:
//
//	t, err := routing.NewTable(resp)
//	if i, ok := t.Owner(descriptors); ok {
//		addr := t.Address(i) // "" when the owner published none
//	}
//
// Tables are immutable and safe for concurrent use. The package holds no
// connections; the client owns those.
package routing
