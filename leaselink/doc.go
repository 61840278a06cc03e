// Package leaselink wires leases into a node, a sibling of regionlink.
// Its Link is the holder side: it decides requests on hot leasable keys of
// groups other nodes own from batches of units their owners granted it,
// and refreshes them over the peer plane in one batched RPC per owner per
// tick. Its Grants is the grantor side: the ledger of the leases this node
// grants as an owner, the answers to refreshes (HandleLease) and the sweep
// of expired leases, changing keys only through the owner's state machine
// (owner.Owner.UpdateOwned), which reads the ledger back (owner.Leases).
// Package lease keeps the accounting of both.
//
// Spend reads the request's limit identities (decide.Request.Defs: lease
// terms, consistency, shadow) and its Route, computed once by the
// forwarding layer: it loads no policy and parses no key. A request on a
// saturated key waits for one refresh to the owner (a probe) instead of a
// hop each, within the caller's forward budget (Budgeter); the probe's
// answer is usually a scheduled grant (lease/design.md §8), whose units
// the Link spends one interval apart, refusing in between with the exact
// wait.
// lease/design.md has the protocol; docs/architecture.md ("Leases") what
// failures cost.
//
// Usage (cmd/node wires this; forward.Router is the caller of Spend):
//
//	g, _ := leaselink.NewGrants(gcfg, o, timeBase, reg)
//	o.EnableLeases(g)
//	l, _ := leaselink.New(cfg, leaselink.Deps{Leaser: peers, Routes: routes, Grants: g, Breakers: b, Clock: timeBase}, logger, reg)
//	router, _ := forward.New(fcfg, forward.Deps{..., Leases: l}, logger, reg)
//	go l.Run(ctx)
//	...
//	l.Shutdown(ctx)
//
// The caller's duties: run Run in one goroutine for the life of the node
// (or drive Tick); give Config.Holder a name unique to this process (the
// node's name plus an incarnation); call Shutdown before exit to wait for
// probes in flight.
//
// Concurrency: a Link and Grants are safe for concurrent use. One mutex
// guards the holder; requests that wait for a refresh release it while
// they wait. A read-write lock guards the ledger, taken inside a key's
// memstore lock (decisions read it concurrently).
// Probes of saturated keys run in goroutines of their own (at most one per
// owner), each ending within RPCTimeout.
package leaselink
