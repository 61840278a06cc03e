// Package reservation is an owner's table of open reservations (issue 26,
// reserve-then-settle): per admitted Reserve decision a Record of where its
// units sit on each rate key's schedule (gcra.Reservation) and the limit it
// was decided at, until a Settle takes it or it expires; and beside the
// records, per key with open records, the shift counter gcra.Settle needs.
//
// It is pure, as gcra is: no clock (callers pass now), no I/O, no
// goroutines, and it never calls out. A Table is internally locked (one
// mutex), safe for concurrent use, and may be called under the caller's
// locks: the owner reads a key's counter under the key's memstore lock.
//
// Usage (package owner):
//
//	t, _ := reservation.New(reservation.DefaultConfig(), src)
//	if !t.Claim() { /* reservations_full: refuse, charge nothing */ }
//	shift := t.Pin(key)             // under the key's lock, at the decision
//	evicted, _ := t.Put(rec)        // admitted: record it (or t.Unclaim())
//	t.Unpin(key)
//	rec, ok := t.Take(id, group, keys) // a Settle; !ok: unknown, Done=false
//	s, _ := t.Shift(key)            // under the key's lock: gcra.Settle
//	t.SetShift(key, settlement.Shift)
//	t.Done(rec)
//	expired := t.Sweep(now)         // charged as reserved
//
// The contract:
//   - Bounded per node: Config.MaxRecords (default 100,000). Claim sets
//     room aside before the decision, so a full table refuses before
//     anything is charged, and an admitted decision always gets its record.
//   - Bounded per key: at most the key's burst open records (see perKey);
//     Put evicts a full key's oldest record, returned as expired.
//   - A key's counter exists while it has open records or pins; a fresh one
//     starts at a value drawn from the source passed to New. Pins keep a
//     counter alive between a decision and its Put, and between a Take and
//     the settlement it feeds, so a counter is never lost while a record
//     still relies on it.
//   - Not persisted: records die with the owner or its hand-off
//     (DeleteFunc); every record that was not settled is charged as
//     reserved.
package reservation
