// Package region shares global rate limits between regions: each region
// runs its own weir cluster, and a limit with scope global (1,000/s for a
// tenant, worldwide) is split into regional shares that follow demand and
// never sum to more than the limit, even while regions are cut off from
// each other or messages are in flight.
//
// Each global key has a home region ([HomeOf]). Every region holds a small
// floor of every key ([Config.Floor]); the home leases the rest out as
// grants with a TTL, sized in proportion to the regions' reported demand
// and damped, and only ever from capacity no other region holds. A share s
// enforces s of the rate and a part of the burst in whole units, so that
// the regions' bursts sum to at most the global one and a region's floor
// holds a unit whenever the burst is at least the number of regions
// ([Config.Limit], the unit rule).
//
// It has two sides, both pure: no goroutines, no I/O, no clock reads. Times
// are integer nanoseconds passed in, as in package gcra; callers own
// locking, the wire and the clock.
//
//   - [Member] is a region's side for the keys one process enforces:
//     [Member.Reports] batches demand into one report per home,
//     [Member.Apply] takes up the replies, [Member.Share] is the share to
//     enforce now.
//   - [Home] is the home's ledger: [Home.Handle] answers a report with
//     grants; [Home.Reserved] is the invariant Σ shares ≤ [Whole].
//
// [Member.Stats] and [Home.Stats] group the state by limit for metrics.
// Package region/sim runs both sides of N regions on a virtual clock.
//
// Usage, on the process that enforces a set of global keys, every
// Config.Interval:
//
//	reps, _ := member.Reports(now, demand) // demand: fraction of the global rate
//	for _, r := range reps {               // send r to r.Home, then:
//		member.Apply(now, reply)           // on its reply, if one comes
//	}
//	// on every decision of a global key:
//	lim, ok := cfg.Limit(member.Share(key, now), global)
//	if lim != last {
//		tat = region.Rescale(tat, now, last, lim) // keeps the key's state
//	}
//
// and on the process that is a key's home, for each report received:
//
//	reply, err := home.Handle(now, report)
//
// The caller's duties: give every process a reporter name of its own and
// reports numbered above any it sent before a restart ([NewMember]); call
// [Home.Adopt] when a key's home moves to this process, or [Home.Moved]
// after a change of ownership among the home region's processes; run every
// region with the same Config; call [Home.Sweep] every few TTLs; give the
// home the keys' bursts ([Home.SetBursts]) so that a burst below the number
// of regions goes to the busiest regions. A share that holds no unit admits
// nothing ([Config.Limit] says so). Package regionlink runs both sides in a weir node. docs/regions.md
// has the protocol, the invariant and why it holds, what a cut-off costs,
// the simulator's figures and how a node runs it.
package region
