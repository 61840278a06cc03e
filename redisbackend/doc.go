// Package redisbackend runs weir's GCRA in Redis: composite decisions as one
// atomic Lua script, and batched load/store of TATs for owners that decide
// in memory and persist to Redis. A StrictQueue coalesces an owner's
// concurrent strict decisions into pipelines (one sender goroutine at a
// time, while calls wait), so the owner itself starts none.
//
// The script is the twin of [gcra.DecideComposite]: for the same TATs, now,
// limits and cost it returns the same results (TooCostly, RetryAfter,
// Remaining, ResetAfter), evaluates every limit before writing, and writes
// all new TATs (each as a decimal string with PX expiry, so a rested key
// simply disappears) only when every limit admits the request. Time is the
// Redis server's TIME unless the caller passes an explicit now. All values
// are integer nanoseconds, gcra's time base (TIME has whole microseconds).
//
// Stored TATs and compatibility: a TAT is stored as its whole Unix
// microseconds, followed by a dot and three digits of nanoseconds only when
// those are not zero ("1764582000123456" or "1764582000123456.789"). Versions
// before nanosecond TATs stored whole microseconds in exactly the first
// form, so keys they wrote read as the same instant here, with no migration
// and no key prefix change. The other way round is loud, not silent: an
// older node's script refuses a dotted value with an error ("holds a
// non-integer TAT") and its LoadTATs fails to parse it, so during a rolling
// upgrade a key last written by a new node makes an old node take its
// failure policy for that key, never decide on a misread TAT. Finish the
// upgrade before relying on fail-closed limits. The script works on
// (microseconds, nanoseconds) pairs and on how far a key is ahead of now,
// which is why spans are bounded by [MaxSpan] (2^52 ns, about 52 days).
//
// The same code serves a single Redis and Redis Cluster through
// redis.UniversalClient. A decision's keys must share one hash tag
// ([limitkey.HashTag]: the tenant group, as in "rl:{tenant42}:user:7") so
// they live in one slot; otherwise the call fails with [ErrCrossSlot]
// before anything is sent.
//
// Usage:
//
//	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
//	be, err := redisbackend.New(rdb, redisbackend.DefaultConfig())
//	if err != nil { ... }
//	d, err := be.Decide(ctx,
//		[]string{"rl:{t42}:all", "rl:{t42}:user:7"},
//		[]gcra.Limit{tenantLimit, userLimit}, 1, 0) // 0: use Redis TIME
//	if err != nil {
//		// Redis slow or down: apply the limit's failure policy.
//	}
//	if !d.Overall.Allowed { ... d.Overall.RetryAfter ... }
//
// Failover (Redis Cluster with replicas): go-redis follows MOVED and ASK
// at once and retries READONLY, CLUSTERDOWN, TRYAGAIN and LOADING with
// backoff, all inside the call's deadline (Config.Timeout or the caller's,
// whichever is sooner), so no call outlives it. It reloads its slot map by
// itself only on MOVED, ASK and READONLY or once a minute, which a killed
// master never triggers; so after every failure that hints at a changed
// topology a Backend asks a *redis.ClusterClient to reload its map in the
// background ([Classify] names the failure classes). See
// docs/operations.md, "Redis failover: what it costs".
//
// Caller's duties:
//
//   - Build the go-redis client with ContextTimeoutEnabled: true (New
//     rejects a *redis.Client or *redis.ClusterClient without it); otherwise
//     socket reads ignore deadlines and a paused Redis holds callers for the
//     client's ReadTimeout. Own and close the client.
//   - Treat an error as "unknown": on a timeout the script may have run.
//     Apply the limit's fail-open, fail-closed or fallback policy and count
//     it; retries belong to the caller.
//   - Keep all TATs on Redis's time base. Owners that decide in memory must
//     translate their clock to Redis TIME (see [Backend.Time]) before
//     storing, or a key could be credited time it never rested.
//   - StoreTATs overwrites unconditionally: only a key's current owner may
//     call it.
//
// Concurrency keys (issue 26) hold a permit.Set's encoding instead of a
// TAT: [Backend.LoadSets] and [Backend.StoreSets] read and write them
// (permitsets.go). The store script keeps the later of two snapshots by
// bytes 2..9 (the set's latest time, big-endian; a tie overwrites) and
// sets PX to the last permit's expiry minus now plus ExpiryGrace. A TAT
// found under such a key reads as an empty set; other bytes are an error
// wrapping ErrBadPermitSet, never an empty set. On Cluster a group's keys
// share its hash tag, so one MGET per slot as for TATs.
//
// Tests of code that uses LoadTATs, StoreTATs and DecidePipelined through
// an interface of its own can use redistest.Memory, an in-memory twin held
// to a Backend on a real redis-server by a conformance test.
//
// A Backend is safe for concurrent use and keeps no state between calls.
package redisbackend
