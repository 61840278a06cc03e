// Package lease is the accounting of leases: an owner node grants a peer a
// batch of units of a hot key, charged to the key's GCRA state up front, so
// the peer decides that key's requests locally until the units run out or
// the lease expires, and the cluster still admits no more than the limit.
//
// It has two sides, both pure: no goroutines, no I/O, no clock reads. Times
// are integer nanoseconds passed in, as in package gcra; callers own
// locking, storage, the wire and the clock.
//
//   - [Grantor] is the owner's ledger. [Grantor.Grant] settles the lease the
//     peer returns and charges a new one against the key's TAT: all the
//     units asked for if they fit, else the most that fit, else a denial
//     with the exact retry-after; at a saturated key, to a peer that
//     asks for it, a scheduled grant of units due one interval apart.
//     [Grantor.Effective] is the TAT every
//     other decision on the key must use: units out on leases (and units
//     that were out until they expired) are not refilled, which is what
//     keeps admitted units within B + W/T exactly.
//   - [Holder] is the peer's side: units held per key, demand per key,
//     the owner's last denial per key. [Holder.Spend] takes units from
//     every key of a request or from none, a scheduled grant's units no
//     earlier than their times; [Holder.Due], [Holder.Refresh]
//     and [Holder.Apply] run one batched refresh per owner; on a saturated
//     key [Holder.Probe] sends one between ticks that waiting requests
//     share ([Holder.Resume]).
//
// [CheckLeasable] says whether a limit may be leased at all (burst at least
// MinBurstPerNode × nodes) and why not, for `weir policy check`; [Reach]
// how far ahead of its writing a TAT set by leases may lie.
//
// Usage, on the owner, under the lock that guards the key's TAT:
//
//	ans, err := grantor.Grant(tat, now, req) // req from the peer's refresh
//	if err != nil { ... }                    // bad request; nothing changed
//	store(ans.TAT)                           // before the reply leaves
//	// every direct decision on a key:
//	res, _ := gcra.Decide(grantor.Effective(group, key, tat, now), now, lim, cost)
//
// and on the peer, under its own lock:
//
//	v, _ := holder.Spend(refs, cost, now) // Spent, Refused, Await or Forward
//	// Await: a refresh is in flight or due; send holder.Probe(owner, now) unless a
//	// refresh is in flight, wait for its answer, then holder.Resume.
//	// Refused with v.Probe: send holder.Probe now, without waiting.
//	for _, owner := range holder.Due(now) {
//		r, _ := holder.Refresh(owner, now) // send r; then
//		holder.Apply(reply, later)         // or holder.Abandon(owner, r.Seq)
//	}
//
// The caller's duties: store Answer.TAT before replying (write-through),
// fold expired leases every few TTLs — [Grantor.Sweep] under every key's
// lock, or [Grantor.Due] then [Grantor.Expire] under each key's own lock —
// and [Holder.Sweep], keep a key's [Grantor.Reservation] in the TAT a new
// owner will load (persisted with it and [Grantor.Adopt]ed, or folded into
// it as the node does), and give each process a fresh name (node plus
// incarnation) for both sides. design.md
// beside this file has the protocol, the sizing rule, what each failure
// costs and how the node wires it in.
package lease
