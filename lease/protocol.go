package lease

import "github.com/weirhq/weir/gcra"

// Return settles a lease: the peer gives back the units of lease Lease,
// granted by Grantor, that it never spent. A zero Lease returns nothing.
type Return struct {
	Grantor string
	Lease   uint64
	Unspent int64
}

// Request is one key of a refresh: it settles the lease the peer held on the
// key (if any) and asks for a new one sized from the peer's demand.
type Request struct {
	// Peer names the requesting node. It must change when the node
	// restarts (name plus boot incarnation), or the owner refuses the
	// restarted node leases on a key until the old one expires.
	Peer string
	// Group is the key's hash tag; Key its storage key.
	Group, Key string
	// Limit and Terms are the key's limit and lease terms; Label names
	// the policy limit, only to label counts (bounded cardinality: never a
	// key).
	Limit gcra.Limit
	Terms Terms
	Label string
	// Demand is the peer's recent rate on the key in units per second
	// (finite, >= 0). Zero asks for nothing and only settles Return.
	Demand float64
	// Return is the lease the peer held on the key and gave up when it
	// sent this request.
	Return Return
	// Scheduled says the peer honours a scheduled grant (Answer.Spacing):
	// it spends each unit no earlier than its time. Without it the owner
	// grants only units that are spendable at once, as to older peers.
	Scheduled bool
}

// Outcome says what the owner did with a request's ask.
type Outcome uint8

const (
	// Settled: the peer asked for nothing (zero demand); only its return
	// was settled.
	Settled Outcome = iota
	// Granted: Units units under lease Lease, spendable for TTL.
	Granted
	// Denied: not even one unit fits now; RetryAfter is exact.
	Denied
	// Capped: leases already hold half the key's burst; the peer forwards.
	Capped
	// Busy: the peer still has an unsettled lease on the key (a request
	// or reply was lost); the peer forwards until that lease expires.
	Busy
)

var outcomeNames = [...]string{"settled", "granted", "denied", "capped", "busy"}

// String returns the outcome's lower-case name, for logs and metric labels.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// Answer is the owner's answer to one Request.
type Answer struct {
	Outcome Outcome
	// TAT is the key's state after the request; the owner stores it
	// (write-through) before the answer leaves. Not sent to the peer.
	TAT int64
	// Grantor and Lease identify a grant (Lease is never 0), for its
	// return: Grantor is the granting ledger's GrantorConfig.Name.
	Grantor string
	Lease   uint64
	// Units granted; > 0 only when Granted.
	Units int64
	// TTL is the grant's lifetime in nanoseconds, to be measured by the
	// peer from when it sent the request.
	TTL int64
	// RetryAfter, when Denied, is the exact wait in nanoseconds until one
	// unit fits, if nothing else happens. When Granted, it is the same
	// wait after the grant: 0 when more units fit now, > 0 when the grant
	// left the key at its edge (the key is saturated). When Capped or
	// Busy, > 0 shortens the peer's pause before it asks again (the
	// default is HolderConfig.RefreshWhenLeft of the TTL).
	RetryAfter int64
	// Credited is how many returned units went back to the key.
	Credited int64
	// Start and Spacing, when Spacing > 0, make a Granted answer a
	// scheduled grant (only to a Request with Scheduled set): the j-th of
	// Units (j from 0) may be spent from Start + j×Spacing nanoseconds
	// after the owner decided, which the peer measures from when the
	// answer arrived. Start may be negative: the first units are
	// spendable at once. Spacing is the key's interval T, and each unit's
	// time is when GCRA would have admitted it; the grant is charged to
	// the TAT like any other (see design.md §8).
	Start, Spacing int64
}

// Refresh is one batched request from a peer to one owner: every key the
// peer holds or wants from that owner.
type Refresh struct {
	Owner string
	// Seq identifies the refresh among the peer's; the reply echoes it.
	Seq   uint64
	Items []Request
}

// Reply is the owner's answer to a Refresh, one Answer per item in order.
type Reply struct {
	Owner   string
	Seq     uint64
	Answers []Answer
}
