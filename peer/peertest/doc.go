// Package peertest is an in-memory network for weir's node-to-node
// forwarding: nodes register a peer.Handler under a name, and each node gets
// a peer.Forwarder that reaches the others by name, with no sockets. Links
// can fail fast, hang, be delayed or be partitioned, so in-process cluster
// tests can exercise forwarding and its failure paths quickly.
//
// Usage:
//
//	net := peertest.NewNetwork()
//	net.Register("a", handlerA)
//	net.Register("b", handlerB)
//	fwd := net.Forwarder("a") // a peer.Forwarder; addresses are node names
//	res, err := fwd.Decide(ctx, "b", item)
//
//	net.Partition([]string{"a"}, []string{"b"}) // calls hang until ctx ends
//	net.HealAll()
//
// Faults are per direction: Drop fails a call at once (ErrDropped, like a
// refused connection), Blackhole hangs it until the caller's context ends
// (like a partition or a frozen process). A call crosses from->to with its
// request and to->from with its answer; a fault on the way back means the
// owner decided but the caller never learns the answer.
//
// The caller's duties: give every call a context with a deadline when a
// blackhole is possible, or it hangs for good; keep delays tiny.
package peertest
