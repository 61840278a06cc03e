// Package permit holds the live permits of one concurrency key: at most N
// slots in flight at once, each held by a permit until it is released or
// its time to live passes.
//
// A plain counter leaks a slot whenever a caller crashes between acquire
// and release. A permit here always carries an expiry, so a crashed
// caller's slot comes back by itself once the TTL has passed; a caller that
// works longer renews its permit.
//
// Like gcra, everything is pure: time is an int64 count of nanoseconds the
// caller passes in (Unix nanoseconds on the cluster's one time base), and
// there is no clock, lock, randomness, I/O, log or metric inside. Expired
// permits are dropped lazily, at every call.
//
// Usage (at the key's owner, under the owner's lock for the key):
//
//	lim := permit.Limit{MaxInFlight: 20, TTL: int64(30 * time.Second)}
//	var id permit.ID
//	_, _ = rand.Read(id[:]) // crypto/rand: the id is the caller's secret
//	d, err := set.Acquire(now, lim, id, 1)
//	if d.Allowed { /* hand id to the caller */ }
//	...
//	set.Release(now, id)
//
// Permit ids come from the caller. They are the only proof of holding a
// permit, so they must be unguessable: 128 bits from a cryptographic random
// source (the owner's crypto/rand). The package draws none itself to stay
// pure and deterministic under test; it refuses the all-zero id (a caller
// that forgot to fill one) and an id already live (a reused id).
//
// For a request that combines a concurrency limit with rate limits,
// all-or-nothing, use [Set.Check] on every concurrency key and the rate
// decision, then [Set.Commit] on each only if all admit: Check changes
// nothing a later call could see, and a Commit at the same (or a later)
// time after an admitting Check succeeds.
//
// Bounds: a limit admits at most [MaxInFlight] (10,000) slots, and a Set
// holds at most that many permits, about 100 bytes each, so one key's
// memory stays under about 1 MB and its encoding under [MaxEncodedLen].
// Time inside a Set never goes backwards: a now earlier than the latest
// one seen reads as the latest, so a permit dropped as expired can never
// come back to life.
//
// A Set is not safe for concurrent use; its caller serialises calls (the
// owner holds a key's state under one lock).
package permit
