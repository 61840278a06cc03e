package lease

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/weirhq/weir/gcra"
)

// MinBurstPerNode is the smallest burst per cluster node a limit needs to be
// leasable: with less, the half of the burst that leases may hold is only a
// unit or two per peer and a lease saves nothing while stranding a large
// share of the key.
const MinBurstPerNode = 4

var (
	// ErrInvalidTerms is returned for lease terms that fail [Terms.Validate].
	ErrInvalidTerms = errors.New("lease: invalid terms")
	// ErrNotLeasable is returned by [CheckLeasable] for a limit that must
	// not be leased; the wrapping message says why.
	ErrNotLeasable = errors.New("lease: limit is not leasable")
	// ErrInvalidRequest is returned for a grant request or a spend that is
	// malformed. Nothing changes when it is returned.
	ErrInvalidRequest = errors.New("lease: invalid request")
)

// Terms are one limit's lease settings, as a policy states them
// (`lease: {max: 50, ttl: 250ms}`).
type Terms struct {
	// Max is the most units one grant may carry, >= 1.
	Max int64
	// TTL is how long a peer may spend a grant, measured by the peer from
	// the moment it sent the request, >= 1µs. Shorter strands less and
	// costs more refreshes.
	TTL time.Duration
}

// Validate reports whether t can be used. It changes nothing.
func (t Terms) Validate() error {
	switch {
	case t.Max < 1:
		return fmt.Errorf("%w: max %d must be at least 1", ErrInvalidTerms, t.Max)
	case t.TTL < time.Microsecond:
		return fmt.Errorf("%w: ttl %s must be at least 1µs", ErrInvalidTerms, t.TTL)
	}
	return nil
}

// ttlNanos is the TTL in nanoseconds, the time base of package gcra.
func (t Terms) ttlNanos() int64 { return t.TTL.Nanoseconds() }

// CheckLeasable reports whether a limit with these terms may be leased in a
// cluster of nodes nodes. It returns nil when it may, and otherwise an error
// wrapping [ErrNotLeasable] (or [ErrInvalidTerms], [gcra.ErrInvalidLimit])
// that says why, for `weir policy check`. It changes nothing.
//
// A limit whose burst is below MinBurstPerNode × nodes is not leasable: the
// owner lets leases hold at most half the burst, so each peer's share would
// be a unit or two.
func CheckLeasable(l gcra.Limit, t Terms, nodes int) error {
	if err := l.Validate(); err != nil {
		return err
	}
	if err := t.Validate(); err != nil {
		return err
	}
	if nodes < 1 {
		return fmt.Errorf("%w: cluster size %d must be at least 1", ErrInvalidRequest, nodes)
	}
	if need := int64(MinBurstPerNode) * int64(nodes); l.Burst < need {
		return fmt.Errorf("%w: burst %d is below %d × %d nodes = %d", ErrNotLeasable, l.Burst, MinBurstPerNode, nodes, need)
	}
	return nil
}

// Size is the number of units a peer reporting demand (units per second)
// should be granted under terms t before the owner's caps: the demand over
// one TTL, rounded up, at least 1 and at most t.Max. It is 0 when demand is
// not positive (or not a number): the peer wants nothing.
func Size(demand float64, t Terms) int64 {
	if !(demand > 0) {
		return 0
	}
	units := math.Ceil(demand * t.TTL.Seconds())
	if units >= float64(t.Max) {
		return t.Max
	}
	return max(1, int64(units))
}

// Cap is the most units that may be outstanding at all peers together for a
// key of limit l: half its burst, rounded down.
func Cap(l gcra.Limit) int64 { return l.Burst / 2 }

// Reach is how far beyond the moment it was written a TAT that leases of
// limit l under terms t can set lies at most, in nanoseconds, for an owner
// whose ledger has the given grace: the larger of
//
//   - Span + TTL/2: a scheduled grant's TAT (Grantor.Grant), whose last
//     unit is due at most TTL/2 after the grant, charged like a decision;
//   - TTL + Grace + ⌊B/2⌋·T: the TAT a node persists for a grant, the
//     key's reservation folded at its latest expiry (leaselink, design.md
//     §5), at most Cap(l) units out until TTL + Grace after the grant.
//
// Every other TAT the package returns (Effective, expiry folds, ordinary
// grants) lies at most Span ahead. A key untouched for Reach since its last
// write is rested, whatever its leases did. Saturates instead of
// overflowing.
func Reach(l gcra.Limit, t Terms, grace time.Duration) int64 {
	scheduled := sat(l.Span(), t.ttlNanos()/2)
	persisted := sat(sat(t.ttlNanos(), grace.Nanoseconds()), floorAt(0, Cap(l), l.Interval))
	return max(l.Span(), scheduled, persisted)
}

// sat is a + b for non-negative a and b, saturating at math.MaxInt64.
func sat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
