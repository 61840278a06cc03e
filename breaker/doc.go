// Package breaker is a circuit breaker for the dependencies on weir's
// decision path: Redis endpoints and peer nodes.
//
// Those calls carry deadlines of a few milliseconds. When a dependency is
// dead, every request would still wait out its full deadline before falling
// back; a breaker turns that into one fast failure. A closed breaker opens
// after [Config.ConsecutiveFailures] failures in a row, or when at least
// [Config.FailureRate] of the calls that finished in the last
// [Config.Window] failed (once [Config.MinRequests] did). An open breaker
// rejects calls with [ErrOpen] for [Config.OpenFor]; then it goes half-open
// and lets [Config.HalfOpenProbes] probe calls through. That many successful
// probes close it; any failed probe opens it again for another OpenFor.
// Recovery is probed by real calls, so the breaker starts no goroutine and
// owns no timer.
//
//	closed --ConsecutiveFailures in a row, or FailureRate over Window--> open
//	open --OpenFor passed--> half_open
//	half_open --HalfOpenProbes successes--> closed
//	half_open --any probe failure--> open
//
// What counts is the caller's to say. A slow dependency is not a dead one:
// a call cut short by the caller's own deadline, or by this process being
// descheduled, is reported as [ErrExcused] and counts for nothing, so only
// refused connections, transport errors and timeouts of the dependency's
// own latency budget open a breaker.
//
// The state machine is github.com/sony/gobreaker/v2's two-step breaker. It
// replaced a hand-rolled lock-free one: Allow plus done costs about 0.4 µs
// and 3 allocations against 0.1 µs and 2 before (go test -bench . on the
// 2-core development machine), while the calls it guards, a forward or a
// Redis round trip, cost tens of microseconds or more. gobreaker reads the
// real clock, so OpenFor and Window run on time.Now.
//
// Usage, with one breaker per endpoint from a [Set]:
//
//	set, err := breaker.NewSet(breaker.DefaultConfig(), logger, reg)
//	...
//	b := set.Get(addr)
//	done, err := b.Allow()
//	if err != nil {
//		return fallback() // breaker.ErrOpen: do not call addr
//	}
//	resp, err := call(ctx, addr)
//	if err != nil && ctx.Err() != nil {
//		err = breaker.ErrExcused // our caller gave up; not addr's fault
//	}
//	done(err)
//
// The caller's duties:
//
//   - After a nil error from [Breaker.Allow], call done exactly once with the
//     call's outcome. A probe whose done is never called keeps its half-open
//     slot, and the breaker can then never close. Extra calls are ignored.
//   - Blame only the dependency: report done(nil) for well-formed error
//     replies (a peer saying "not owner" is healthy) and an error wrapping
//     ErrExcused for the caller's own deadline or cancellation and for this
//     process's own stalls. Report transport errors and timeouts of the
//     dependency's own budget as failures.
//   - Decide what a rejected call means: fall back (local decision, fail
//     open or closed by policy) rather than retry in a loop.
//   - Call [Set.Forget] when a peer leaves, so its metric series go away.
//
// Everything is safe for concurrent use.
package breaker
