// Package writebehind persists the TATs an owner node decides in memory to
// Redis in the background, so that another node taking over a group loads
// recent state instead of granting a full burst.
//
// The owner calls [Writer.Mark] after every decision that changed a TAT.
// Marks coalesce per key (the largest TAT wins) in sharded maps; a flush
// loop ([Writer.Run]) takes everything marked since the last flush and
// stores it with [Sink.StoreTATs] (a *redisbackend.Backend) in batches of
// Config.MaxBatch, one Redis pipeline each. Decisions never wait for Redis:
// when a store fails its TATs return to the backlog (keeping the larger of
// the failed value and any newer mark) and are retried with exponential
// backoff up to Config.MaxBackoff.
//
// # What a crash can lose
//
// A mark is stored by the end of the first flush pass that starts after
// it. A mark that just misses a pass waits for the rest of that pass, then
// FlushInterval, then the next pass, so while Redis is healthy the window of
// decisions per key that a crash of the owner can lose is
//
//	L = FlushInterval + 2 × P,  P = ceil(backlog / MaxBatch) × Redis round trip
//
// which for a backlog under MaxBatch is about FlushInterval + two round
// trips (about 5ms + 2 × 0.2ms with the defaults on a LAN); each P is capped
// by ceil(backlog/MaxBatch) × Timeout. While Redis fails, L grows by the
// time since the last successful flush, and after Redis recovers by up to
// one more backoff delay (at most MaxBackoff). The new owner loads TATs that
// are behind by at most L, so for each key it may re-admit at most the cost
// the old owner admitted during L (never more than burst + L/T).
//
// Usage:
//
//	be, _ := redisbackend.New(rdb, redisbackend.DefaultConfig())
//	clk, err := redisclock.New(redisclock.DefaultConfig(), be, clock.Real(), logger, reg)
//	w, err := writebehind.New(writebehind.DefaultConfig(), be, clk.Now, logger, reg)
//	if err != nil { ... }
//	go w.Run(ctx)                     // until shutdown; ends with a final flush
//	...
//	res := gcra.Decide(...)           // on the decision path
//	w.Mark(key, res.TAT)              // cheap; never blocks on Redis
//	...
//	err = w.FlushKeys(ctx, inGroups)  // hand-off: after marking for them stopped
//	err = w.Flush(ctx)                // on leave
//
// Caller's duties:
//
//   - Mark only keys this node owns, with TATs on the time base of now
//     (Redis time: see package redisclock). StoreTATs overwrites
//     unconditionally, and a TAT at or before now deletes its key.
//   - Mark each key's TATs in decision order (for example under the lock
//     that serialised the decision). Coalescing keeps the largest TAT only
//     within one flush window; a smaller TAT marked after a larger one
//     was flushed overwrites it in Redis.
//   - Before handing a group off, stop deciding (and marking) its keys,
//     then call FlushKeys with a deadline; only then let the new owner load
//     them. A mark made after FlushKeys took its key is flushed later, by
//     Run, possibly over the new owner's writes.
//   - Run one Run loop per Writer and cancel its context on shutdown; Run
//     returns after a final flush bounded by Config.Timeout.
//   - Treat a Flush or FlushKeys error as "state may be behind by up to L".
//
// Ordering: flushes are serialised, so this Writer never writes an older
// TAT of a key after a newer one. A store that timed out may still be
// applied by Redis later, though, on a connection that was abandoned; in
// the rare case that it lands after the retry, Redis holds the older
// value until the next mark of that key is flushed.
//
// Two clocks: New's now is the TATs' time base (Redis time), stamped on
// each batch; the pauses between flushes and the retry backoff wait on a
// clock.Clock, the real one unless [WithClock] passes another (tests use
// a clocktest.Manual and never sleep).
//
// A Writer is safe for concurrent use.
package writebehind
