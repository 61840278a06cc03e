package rlqs

import (
	"errors"
	"fmt"
	"time"
)

// Config tunes a Server. Every duration is measured on the server's
// clock.
type Config struct {
	// NodeName prefixes every stream's lease holder name; required.
	NodeName string
	// MaxStreams bounds the streams open on this server at once; a stream
	// beyond it is refused with RESOURCE_EXHAUSTED.
	MaxStreams int
	// MaxBuckets bounds the buckets one stream may subscribe; a report that
	// would subscribe more ends the stream with RESOURCE_EXHAUSTED.
	MaxBuckets int
	// MaxReportBuckets bounds the bucket usages in one report; a larger
	// report ends the stream with INVALID_ARGUMENT.
	MaxReportBuckets int
	// AssignTTL is the longest assignment_time_to_live sent, a whole
	// number of seconds >= 1s (Envoy reads only the seconds). The lease
	// backing an assignment must outlive it by Delivery, so a limit's
	// lease ttl shorter than MinLeaseTTL is not served with token buckets.
	AssignTTL time.Duration
	// Renew is how long after an assignment the stream renews it with a
	// fresh lease: the assignment is re-sent (unchanged when the lease
	// allows, which extends its TTL without resetting Envoy's bucket).
	// It is capped so that a renewal always lands before the assignment
	// expires. Longer renews waste fewer units (each renewal writes off
	// Delivery + Burst of rate) and react more slowly to demand.
	Renew time.Duration
	// Delivery bounds how long an assignment takes to reach the Envoy
	// after it is sent. Envoy counts an assignment's TTL from arrival,
	// so the exactness bound assumes it (docs/envoy.md, "RLS or RLQS").
	Delivery time.Duration
	// Burst sizes a token bucket: max_tokens is Burst's worth of its
	// rate, at least 1.
	Burst time.Duration
	// Tick is how often a stream checks its buckets for renewals, expiries
	// and idleness.
	Tick time.Duration
	// RPCTimeout bounds one lease call to the keys' owners.
	RPCTimeout time.Duration
	// IdleAfter abandons a bucket whose reports showed no requests for
	// this long: Envoy forgets it, and its units go back to the owner.
	IdleAfter time.Duration
	// AllowTTL is the TTL of the blanket ALLOW_ALL sent for buckets no
	// limit governs (unknown domain, no matching or an unlimited limit); it
	// is re-sent, re-resolved against the current policy, every AllowTTL/2.
	AllowTTL time.Duration
	// MaxDenyTTL caps the TTL of the blanket DENY_ALL sent while a limit
	// is exhausted; the stream asks again when the owner's retry-after
	// ends, and the deny's TTL is that retry-after rounded up to seconds.
	MaxDenyTTL time.Duration
}

// DefaultConfig returns 1024 streams, 1000 buckets per stream and per
// report, a 2s assignment renewed every 1.6s, a 50ms delivery bound, a 50ms
// burst, a 100ms tick, a 200ms lease call timeout, a 30s idle timeout, a
// 10s allow TTL and a 10s deny TTL cap. NodeName must still be set.
func DefaultConfig() Config {
	return Config{
		MaxStreams: 1024, MaxBuckets: 1000, MaxReportBuckets: 1000,
		AssignTTL: 2 * time.Second, Renew: 1600 * time.Millisecond, Delivery: 50 * time.Millisecond,
		Burst: 50 * time.Millisecond, Tick: 100 * time.Millisecond, RPCTimeout: 200 * time.Millisecond,
		IdleAfter: 30 * time.Second, AllowTTL: 10 * time.Second, MaxDenyTTL: 10 * time.Second,
	}
}

// Validate reports whether c is usable. It changes nothing.
func (c Config) Validate() error {
	switch {
	case c.NodeName == "":
		return errors.New("rlqs: node name is required")
	case c.MaxStreams < 1 || c.MaxBuckets < 1 || c.MaxReportBuckets < 1:
		return fmt.Errorf("rlqs: max streams %d, buckets %d and report buckets %d must be at least 1", c.MaxStreams, c.MaxBuckets, c.MaxReportBuckets)
	case c.AssignTTL < time.Second || c.AssignTTL%time.Second != 0:
		return fmt.Errorf("rlqs: assign ttl %s must be a whole number of seconds, at least 1s", c.AssignTTL)
	case c.AllowTTL < time.Second || c.MaxDenyTTL < time.Second:
		return fmt.Errorf("rlqs: allow ttl %s and max deny ttl %s must be at least 1s", c.AllowTTL, c.MaxDenyTTL)
	case c.Delivery <= 0 || c.Burst <= 0 || c.Tick <= 0 || c.RPCTimeout <= 0 || c.IdleAfter <= 0:
		return errors.New("rlqs: delivery, burst, tick, rpc timeout and idle after must be positive")
	case c.Renew <= c.Delivery:
		return fmt.Errorf("rlqs: renew %s must exceed delivery %s", c.Renew, c.Delivery)
	}
	return nil
}

// MinLeaseTTL is the shortest lease ttl a limit needs for token-bucket
// assignments: a one-second assignment, its delivery and a lease call.
func (c Config) MinLeaseTTL() time.Duration { return time.Second + c.Delivery + c.RPCTimeout }
