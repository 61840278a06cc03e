// Package peertest is an in-memory network for weir's node-to-node plane,
// the twin of package peer's Client and Register: nodes register a
// peer.Handler under a name (and a peer.RegionHandler with
// peer.WithRegion, as with peer.Register), and each node gets a
// peer.Forwarder, a peer.Leaser and a peer.Reporter (a regionlink.Sender)
// that reach the others by name, with no sockets. Forwards, lease
// refreshes and region reports cross the same links: they can fail fast,
// hang, be delayed or be partitioned, for all three kinds alike, so
// in-process tests can exercise the plane and its failure paths quickly.
//
// Usage:
//
//	net := peertest.NewNetwork()
//	net.Register("a", handlerA)
//	net.Register("b", handlerB)
//	fwd := net.Forwarder("a") // a peer.Forwarder; addresses are node names
//	res, err := fwd.Decide(ctx, "b", item)
//	net.Register("c", handlerC, peer.WithRegion(linkC))
//	reply, err := net.Reporter("a").Send(ctx, "c", report, false)
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
