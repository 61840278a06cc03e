// Package clientlease is a node's side of client-side leases: the
// weir.v1.Leases service, by which an application process holds leases of
// its hot leasable keys and decides them itself (the Go client's
// Config.Leases), as a peer node does with the leases it holds.
//
// Each Hold stream is one lease holder. The node names it — Config.Name
// (node name and boot incarnation) plus a counter — and every refresh on
// the stream travels to the keys' owners under that name, through a
// consumer-owned Relay: each item to its key's owner, one refresh per
// owner, NotOwner and failures answered Busy. The owners' lease.Grantor
// does the accounting exactly as for a peer node's refreshes, so across
// any number of holders (nodes and client processes) a key admits at most
// B + W/T in any window W (lease/design.md §1).
//
// The caller sends descriptors, never numbers: a lookup resolves a
// descriptor set with the node's policy and answers whether every limit
// it matches is leasable (lease terms, fast, enforced, burst at least
// lease.MinBurstPerNode per node) with the keys, limits and terms; a
// refresh item names a key and a descriptor set of it, and the node
// resolves the set again to find the key's numbers and terms. A key that
// is not (or no longer) leasable for its descriptors is answered
// NOT_LEASABLE and nothing is relayed for it.
//
// Usage, on the node's public gRPC server:
//
//	svc, err := clientlease.New(clientlease.DefaultConfig() /* Name set */,
//		clientlease.Deps{Relay: relay, Policies: policies, Members: routes.Members}, logger, reg)
//	clientlease.Register(grpcServer, svc)
//
// # What a caller can and cannot do
//
// An outsider with access to the public port cannot spend, lock or reset
// another caller's quota beyond what Decide already lets it spend:
//
//   - Spend. A grant of n units is charged to the key like a Decide of
//     cost n, under descriptors the caller chose; Decide lets any caller
//     spend any descriptors' quota the same way. Grants are at most the
//     policy's max per holder and key, and all leases together hold at
//     most half the key's burst (lease.Cap), so leasing takes no more
//     than the same caller could take with Decide calls.
//   - Lock. One holder has at most one open lease per key, and a lease's
//     units are unrefilled only until it is settled or expires (its TTL,
//     from the policy: at most 10s). A holder that vanishes stops holding
//     anything one TTL later. Holders per node and per connection are
//     bounded (MaxHolders, MaxHoldersPerConn), streams end after
//     IdleTimeout without a request, and requests are bounded in items,
//     lookups, descriptors and key size. A caller that fills the half of
//     a key's burst leases may hold makes other holders forward to the
//     owner (Capped): they decide over Decide, on the other half.
//   - Reset. Returns credit units back only for a lease the owner holds
//     open, granted by the same ledger, to the same holder — the stream's
//     name, which the caller never chooses — and at most the units
//     granted; anything else credits nothing (lease.Grantor.Grant). No
//     caller can return, settle or hold another's leases. A holder that
//     reports units unspent that it spent lets its own requests through
//     twice; that is a caller ignoring the limiter's answer, which it
//     could do without weir, and it gives other callers more room, not
//     less.
//
// Bad input (unknown fields, too many items or lookups, a repeated key,
// demand that is not a finite rate >= 0, a malformed return, empty or
// oversized descriptors or keys) ends the stream with INVALID_ARGUMENT
// naming the field before anything is resolved, relayed, settled or
// granted. A holder's units when its stream ends strand at their owners
// and come back one TTL (plus the owner's grace) later.
//
// The caller's duties: give Config.Name the node's name and a fresh
// incarnation per process; pass a Relay that routes to the keys' current
// owners and answers Busy for anything it cannot place; register the
// service on the public gRPC server only (it never needs the peer plane's
// credentials); call Shutdown before the server's GracefulStop, since a
// lease stream never ends on its own; metrics: weir_client_lease_holders,
// weir_client_lease_requests_total{result} and
// weir_client_lease_items_total{outcome}. Service is safe for concurrent
// use.
package clientlease
