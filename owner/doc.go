// Package owner is the owner's synchronous state machine: it decides the
// groups this node owns (a group is a limit key's hash tag, usually the
// tenant; the ring names one owner per group), and answers the work peers
// forward to it, their lease refreshes and their fallback debt. It routes
// nothing and starts no goroutines, as etcd's RawNode under Node: the
// forwarding layer (package forward) calls it, and drives its heartbeat.
//
// Owners decide `fast` limits in memory (memstore) and persist every changed
// TAT to Redis write-behind; before its first decision on a key an owner
// loads the key's TAT from Redis, so a group that moves (join, leave, crash)
// keeps its state, unless package rested's load rule says the key is rested
// (swept, or of groups owned without a change for longer than its span plus
// a margin). `strict` limits are decided by the Redis script through
// Deps.Strict (redisbackend.StrictQueue coalesces them into pipelines).
// With no Redis, everything is decided in memory and a moved group starts
// rested. Redis sits behind the consumer-owned Redis and Strict interfaces;
// unit tests use redistest's in-memory twin.
//
// What it owns: owner memory's keys, the load rule (a rested.Rule), freeze detection
// (freeze.go). The lease ledger of the grants this node makes lives in
// leaselink.Grants, which changes keys only through UpdateOwned and
// UpdateHeld (grant.go), and whose Effective TATs decisions read
// (Leases). What it trusts:
// forwarded work reaches it through intake.Validator, which refuses input
// the public API would refuse, replaces the sender's numbers with the owner
// policy's, and fills each item's Defs from the owner's policy, resolving
// each key once; the Owner then reads Defs (lease terms, scope) and never
// parses a key.
//
// Usage (cmd/node wires this; forward.Router is the caller):
//
//	o, _ := owner.New(cfg, owner.Deps{Ring: routes, Mem: mem, Redis: b, Strict: q, WriteBehind: wb}, logger, reg)
//	v, _ := intake.NewValidator(intake.DefaultValidatorConfig(), o, policies, nowNanos, reg)
//	peer.Register(grpcServer, v)  // forwarded work, leases and debt
//	agg, err := o.Decide(ctx, r, out) // the forwarding layer found this node the owner
//
// The caller's duties: call OwnershipChanging before every ring change,
// and Drop after it with the keys whose group moved away (and with every
// key on leave); call Beat every BeatEvery from one goroutine after
// StartHeartbeat, and at once when ThawRequests fires; call Sweep
// periodically instead of the memory's own.
//
// Concurrency limits and reservations (issue 26): Decide and HandleDecide
// keep plain requests on the path above; a request with an Op, Reserve or
// concurrency keys goes to decideGrant (permits.go) and answers in its
// decide.Grant (HandleDecide allocates one per such item and returns it in
// peer.Result.Grant). Concurrency keys hold a permit.Set each in a table
// beside memstore (permits_table.go), sharded by group, capped by
// Config.MaxPermitKeys; a request locks its sets in key order and holds
// them across its rate decision and its write-through to Deps.Permits, so
// it commits all or nothing; it is ordered against hand-off by the
// memory's epoch as decisions are (Drop drops the sets after the epoch
// moved, and waits for a write-through in flight). A set is loaded from
// Redis on first use (no rested rule); acquire and renew are
// write-through (a failed write undoes them: redis_unavailable, or
// limiter.ReasonPermitsUnavailable when the request's rate keys were
// charged first, which stay charged); release is written too, but a failed
// write does not undo it. A corrupt stored value is state_load_failed.
// Strict requests with permits, Reserve or an Op are refused
// (ErrStrictGrant). Sweep expires permits and drops empty sets.
//
// Reservations (reserve.go): a Reserve decision of rate keys goes through
// decideAt with a capture hook that reads each key's TAT and shift counter
// under its lock, and leaves a record in a reservation.Table (bounded per
// node and per key); a Settle op takes it and applies gcra.Settle to each
// key under its memstore lock (UpdateAt), at the reservation's stamp at the
// earliest. Lock order: memstore shard lock, then the table's mutex.
// Records are not persisted: Drop (hand-off, leave, thaw) forgets those of
// the lost keys, and Sweep expires them at their limit's reserve_ttl,
// charged as reserved. Global and strict keys cannot reserve.
//
// Concurrency: an Owner is safe for concurrent use. Decisions run on their
// callers' goroutines, ordered against hand-offs by the memory's epoch
// (decideLocal); drops and thaws are serialised by one mutex; the lease
// ledger sits behind a read-write lock taken inside a key's memstore lock.
package owner
