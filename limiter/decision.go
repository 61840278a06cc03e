package limiter

import (
	"errors"
	"time"
)

// ErrInvalidRequest wraps every error caused by the caller's input: too many
// or oversized descriptors, unknown descriptor names, a bad cost, limits of
// one request spanning several groups. Such a request consumes nothing.
// Transports map it to gRPC INVALID_ARGUMENT and HTTP 400.
var ErrInvalidRequest = errors.New("invalid request")

// Input bounds. A request outside them is refused with ErrInvalidRequest.
const (
	MaxDescriptors     = 32
	MaxDescriptorBytes = 256 // for a descriptor's name and for its value
	MaxCost            = 1_000_000_000
	MaxBatch           = 1000 // requests in one DecideBatch
)

// Request is one question: may a request with these descriptors, costing
// Cost units, pass? Cost must be at least 1: there is no default here (the
// transports apply the API's default of 1 to an absent cost), and a cost of
// 0 is refused with ErrInvalidRequest rather than read as 1.
//
// Reserve asks the owner to keep the charge of the request's rate limits
// as a reservation that Settle later refunds or extends (Decision.
// Reservation). It is refused with ErrInvalidRequest when an enforced
// limit it matches is strict or global; a request matching no rate limit
// is decided as usual and gets no reservation.
type Request struct {
	Descriptors map[string]string
	Cost        int64
	Reserve     bool
}

// Decision is the answer to one Request.
type Decision struct {
	// Allowed is false only when an enforced (non-shadow) limit denies.
	Allowed bool
	// TooCostly: the cost exceeds an enforced limit's burst; the request can
	// never pass and RetryAfter is zero.
	TooCostly bool
	// Matched is false when no limit matched; the request is then allowed.
	Matched bool
	// RetryAfter is the exact wait until the request would pass (denials).
	RetryAfter time.Duration
	// Remaining is the smallest remaining count over enforced limits.
	Remaining int64
	// ResetAfter is the longest time until an enforced limit is rested.
	ResetAfter time.Duration
	// Limits has one entry per matched limit, in policy order, shadow
	// limits included.
	Limits []LimitDecision
	// Fallback is non-nil when a failure policy made this decision.
	Fallback *Fallback
	// FromLease: this node decided the enforced limits from a lease it
	// holds, or refused them from the owner's last answer, without asking
	// the owner (exact; not a fallback).
	FromLease bool
	// PolicyVersion names the policy that decided.
	PolicyVersion string
	// Permit is the token of the slots an admitted request holds on its
	// concurrency limits until Release or their ttl; nil when it matched
	// none, was denied, or was admitted by a failure policy (a fallback
	// admission holds no slot). A bearer secret.
	Permit []byte
	// Reservation is the token of an admitted Reserve request's charge
	// on its rate limits, for Settle; nil otherwise (and under fallback).
	Reservation []byte
}

// The kinds of a LimitDecision.
const (
	KindRate        = "rate"
	KindConcurrency = "concurrency"
)

// LimitDecision is one matched limit's part of a Decision.
type LimitDecision struct {
	Name       string
	Key        string
	Shadow     bool
	Allowed    bool
	TooCostly  bool
	Remaining  int64
	RetryAfter time.Duration
	ResetAfter time.Duration
	// Burst is the limit's quota; Window the time to refill it from empty
	// (Burst * emission interval). Together they are the RateLimit-Policy.
	//
	// For a concurrency limit (Kind KindConcurrency) Burst is max in
	// flight, Window the permit ttl, Remaining the free slots, RetryAfter
	// the exact wait until enough permits expire (0 when allowed) and
	// ResetAfter the time until the last live permit expires.
	Burst  int64
	Window time.Duration
	// InFlight is the permits live on a concurrency limit after the
	// decision (0 for rate limits, and when a failure policy decided).
	InFlight int64
	// Kind is KindRate or KindConcurrency.
	Kind string
}

// Fallback says which failure policy decided and why.
type Fallback struct {
	Mode   string // "open", "closed" or "local"
	Reason string // e.g. "redis_unavailable"
}
