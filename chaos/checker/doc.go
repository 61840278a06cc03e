// Package checker judges a chaos run's history against the bounds weir
// documents: within any window of width W a key of a limit with emission
// interval T and burst B admits at most B + W/T units, widened only by the
// terms docs/architecture.md ("What a failure can cost") names for a fault.
//
// Check runs four checks over a history.History:
//
//   - Window bound. For every (limit, key) and every configured window
//     width W, each window [s, s+W] starting at an admitted operation's
//     invoke time counts the admitted operations that lie entirely inside
//     it (Invoke >= s and Complete <= s+W), so every violation reported is
//     certain whatever moment inside [Invoke, Complete] the decision took.
//     Admissions made normally are held to B + W/T, multiplied by a fault's
//     Owners for fast limits while split ownership may last (the fault and
//     its recovery) and widened by the crash-loss term for each crash the
//     window overlaps. For a limit whose on_failure is local (written, or
//     the default: a per-member share of the limit) the normal and
//     fallback admissions together are held to that normal term plus one
//     fallback term per node that admitted by fallback in the window: its
//     fallback burst + W × its fallback rate, where a default share is
//     derived from the fewest members the node reported during the window
//     (history Members events). Closed limits must admit nothing by
//     fallback; open limits' fallback admissions are reported, not judged.
//   - Availability and latency per phase (healthy, fault, recovery), and
//     the longest stretch in which a key that was asked got no normal
//     (non-fallback) answer within the deadline.
//   - State survival: a key saturated just before an owner is killed (or
//     restarts with empty memory) must not get a fresh burst afterwards.
//   - Sanity: operations with impossible times or unknown limits.
//
// A leasable limit (history.LimitSpec.LeaseMax > 0) is judged like any
// other: leases add no term. What leasing did — the nodes' lease counters
// from the history's Leases event, stranded units among them — is reported
// per leasable limit in Result.Leases, never judged.
//
// Only allowed operations count as admissions: a denied, failed or timed-out
// call admitted nothing as far as its caller knows. Windows are swept per
// key with two pointers over the key's admissions sorted by invoke and by
// complete time, so a check costs O(n log n) in the number of admissions.
package checker
