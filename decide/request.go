package decide

import (
	"slices"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/lease"
)

// Def is one limit's identity as its policy defines it: what a decision
// needs to know about a key's limit beyond its numbers. Built once per
// compiled policy limit; immutable, so shared by every request of it.
type Def struct {
	// Name is the policy limit's name: the label of per-limit metrics.
	Name string
	// Global is true for scope: global limits, shared between regions.
	Global bool
	// Strict is true for consistency: strict limits, decided by Redis.
	Strict bool
	// Shadow is the limit's own shadow flag (before tiers): shadow limits
	// never deny and are never leased.
	Shadow bool
	// Lease, when set, are the limit's lease terms (only fast limits).
	Lease *lease.Terms
}

// Leasable reports whether d names a limit peers may decide from leases:
// fast, enforced, with lease terms. A nil d is not leasable.
func (d *Def) Leasable() bool {
	return d != nil && d.Lease != nil && !d.Shadow && !d.Strict
}

// Request is one composite decision for the limits of one group: every
// limit is evaluated, and all commit or none do. Keys, Limits and Defs pair
// up by index.
type Request struct {
	// Group is the hash tag every key shares (the group descriptor's value).
	Group  string
	Keys   []string
	Limits []gcra.Limit
	// Defs are the keys' limits' identities; empty until the owner's
	// validation fills them on a request that crossed the wire.
	Defs []*Def
	Cost int64
	// Now is the receiving node's stamp in Unix nanoseconds. It travels with
	// forwarded work; a store with its own time base (Redis TIME) may use
	// that instead.
	Now int64
	// Strict asks for the decision to be made by Redis rather than from an
	// owner's memory (some limit of the composite has consistency: strict).
	Strict bool
	// Debt marks fallback debt rather than a decision: the sender admitted
	// Cost units on every key by its failure policy while it could not
	// reach the owner, and the owner charges them to the keys' state
	// instead of deciding (package owner).
	Debt bool
	// FromLease is set by the store, not the caller: it decided from a
	// lease this node holds (or refused from the owner's last answer)
	// without asking the owner. It never crosses the wire.
	FromLease bool
}

// Def returns the identity of key i, nil when none is known.
func (r *Request) Def(i int) *Def {
	if i < len(r.Defs) {
		return r.Defs[i]
	}
	return nil
}

// Clone returns r with slices of its own, for a forward that may outlive
// the call r was passed to.
func (r *Request) Clone() Request {
	c := *r
	c.Keys, c.Limits, c.Defs = slices.Clone(r.Keys), slices.Clone(r.Limits), slices.Clone(r.Defs)
	return c
}

// Route is where a request's group is decided, computed once per request
// by the forwarding layer from the ring and passed down.
type Route struct {
	// Owner is the owner node's name.
	Owner string
	// Addr is the owner's peer address; "" when the owner is this node or
	// its address is unknown.
	Addr string
	// Epoch is the ring's assignment fingerprint the route was read at.
	Epoch uint64
}
