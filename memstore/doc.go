// Package memstore keeps GCRA state (one TAT per key) in process memory and
// decides composite requests against it atomically.
//
// The map is split into shards, each behind its own mutex. A request's keys
// all belong to one group (their hash tag), and the shard is chosen by group,
// so one lock covers a whole composite decision and requests for different
// groups rarely contend. There is no global lock on the decision path.
//
// Idle keys cost nothing to forget: a key whose TAT is at or before now
// (read as a decision reads it, clamped to gcra.MaxTime) behaves exactly
// like a missing key, so [Store.Sweep] and the MaxKeys eviction delete such
// keys and memory follows the set of active keys.
//
// Usage:
//
//	s := memstore.New(memstore.DefaultConfig())
//	out := make([]gcra.Result, len(keys))
//	agg, err := s.Decide(ctx, group, keys, limits, cost, now, out)
//	...
//	removed := s.Sweep(now) // periodically, from one goroutine
//
// The caller supplies time (Unix nanoseconds, gcra's time base) on every
// call, and TATs are on the same base; the store reads no
// clock. All methods are safe for concurrent use.
package memstore
