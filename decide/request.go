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
	// Concurrency is true for kind: concurrency limits. Their key holds
	// live permits (package permit), not a TAT, and their gcra.Limit in a
	// Request carries the permit bound: Burst is max_in_flight and
	// Interval the permit TTL in nanoseconds (PermitLimit). Never leased,
	// strict or global.
	Concurrency bool
	// ReserveTTL is how long, in nanoseconds, a reservation on this rate
	// limit may be settled after it was made; 0 means DefaultReserveTTL.
	ReserveTTL int64
}

// DefaultReserveTTL is the settle window of a reservation on a limit
// without reserve_ttl: 5 minutes, in nanoseconds.
const DefaultReserveTTL = int64(5 * 60 * 1e9)

// PermitLimit reads a concurrency key's gcra.Limit as its permit bound:
// max in flight (Burst) and permit TTL in nanoseconds (Interval).
func PermitLimit(l gcra.Limit) (maxInFlight, ttl int64) { return l.Burst, l.Interval }

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
	// Reserve asks the owner to remember the charge of every rate key as
	// a reservation that a later Settle may refund or extend (package
	// gcra: Reserve, Settle). Decided at the owner, never from a lease.
	Reserve bool
	// Op, when set, makes the request a Release, Renew or Settle of the
	// permits or reservation named by a token instead of a decision: Keys
	// are the token's keys (Limits and Defs as for a decision), Cost is
	// unused, and the answer is in Grant.
	Op *Op
	// Grant, when the caller sets it, receives what the store returns
	// beyond the gcra results: the permit and reservation tokens of an
	// admitted decision, or an Op's outcome. A store leaves it alone when
	// it is nil (plain decisions allocate nothing for it).
	Grant *Grant
}

// OpKind names what an Op does.
type OpKind uint8

// The kinds of Op.
const (
	// OpRelease gives the permit's slots back at once.
	OpRelease OpKind = 1 + iota
	// OpRenew extends the permit's life by TTL (0: the limit's ttl).
	OpRenew
	// OpSettle charges the reservation its Actual cost.
	OpSettle
)

// Op is one operation on a token's permit or reservation, carried by a
// Request to the owner of the token's group.
type Op struct {
	Kind OpKind
	// ID is the permit's or reservation's id, from the token.
	ID [16]byte
	// TTL is OpRenew's new life in nanoseconds; 0 means the limit's ttl.
	TTL int64
	// Actual is OpSettle's real cost, >= 0.
	Actual int64
}

// Grant is what a store answers beyond the gcra results (Request.Grant).
type Grant struct {
	// Permit is the token of the permits an admitted decision holds on
	// its concurrency keys; nil when it matched none (or was admitted by
	// a failure policy: a fallback permit holds no slot).
	Permit []byte
	// Reservation is the token of an admitted Reserve decision.
	Reservation []byte
	// InFlight is, per key of the request (by index), the permits live on
	// a concurrency key after the decision; 0 for rate keys. Nil when the
	// request has no concurrency key.
	InFlight []int64
	// Done reports an Op's effect: released, renewed or settled. False
	// for a token the owner does not know (expired, released, settled,
	// or lost with a crashed owner): that is an answer, not an error.
	Done bool
	// Expiry is OpRenew's new expiry of the permit, Unix nanoseconds.
	Expiry int64
	// Settlement is OpSettle's outcome over the reservation's keys:
	// Refunded the fewest units refunded on any key, Extra and Forgiven
	// the most (TAT and Shift are not set).
	Settlement gcra.Settlement
}

// HasConcurrency reports whether any of r's keys is a concurrency limit's.
func (r *Request) HasConcurrency() bool {
	for _, d := range r.Defs {
		if d != nil && d.Concurrency {
			return true
		}
	}
	return false
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
