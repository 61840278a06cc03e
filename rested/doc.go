// Package rested answers one question for an owner (package owner): may a
// key that owner memory does not hold be decided as rested, with no load
// from Redis? It has one job and no I/O: it remembers the keys the owner
// swept as rested during the current memory epoch, and since when the owner
// has held its ownership without a change.
//
// A key is rested, for the owner asking at memory epoch e, when either
//
//   - the owner swept it as rested during e (Rule.Swept), or
//   - the owner has owned its groups continuously, at e, for longer than the
//     key's span plus Config.Margin (Rule.Rested).
//
// Why the second holds: only a key's owner writes a fast key's TAT to
// Redis, and a TAT is never more than the key's span ahead of the moment
// it was last decided or settled (the caller's span: twice burst ×
// interval, as a settlement's excess may reach that far, see gcra.Settle;
// a lease write-through adds the lease's TTL; fallback debt is capped at
// burst × interval, see owner/debt.go). Every earlier owner stopped deciding the key at
// the latest when it learned of the ring change, which Margin bounds from
// the moment this owner's ownership began. So once span + Margin have
// passed, any TAT Redis holds from an earlier owner is in the past, and a
// key this owner never held decides exactly as if loaded. Keys this owner
// held leave memory only rested (the sweeper; memstore evicts only rested
// keys and refuses new ones when full, ErrFull) or by a drop, which moves
// the epoch.
//
// Ownership restarts on Restart, which the owner calls before every ring
// change (its caller, forward.Router's SetMembers, tells it) and after
// every move of the memory epoch (a hand-off drop, a drop after a rejoin, a
// thaw after a freeze); a question asked at an epoch newer than the
// stretch's starts a new stretch too.
// Starting later than the real change only costs loads; the epoch orders a
// question against a drop (memstore refuses to create absent keys at an
// epoch that has moved).
//
// Usage (package owner):
//
//	r, _ := rested.New(rested.DefaultConfig(), clk)
//	r.Restart(mem.Epoch())           // before the ring changes, after a drop
//	r.Swept(epoch, key)              // the sweeper freed key as rested
//	if r.Rested(epoch, key, span) {} // decide key from now, no load
//
// A Rule is safe for concurrent use. It starts no goroutines.
package rested
