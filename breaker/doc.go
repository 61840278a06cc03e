// Package breaker is a circuit breaker for the dependencies on weir's
// decision path: Redis endpoints and peer nodes.
//
// Those calls carry deadlines of a few milliseconds. When a dependency is
// dead, every request would still wait out its full deadline before falling
// back; a breaker turns that into one fast failure. After
// [Config.FailureThreshold] consecutive failures it opens and rejects calls
// with [ErrOpen] for [Config.OpenFor]; then it goes half-open and lets up to
// [Config.HalfOpenProbes] probe calls through. That many successful probes
// close it; any failed probe opens it again for another OpenFor. Recovery is
// probed by real calls, so the breaker starts no goroutine and owns no timer.
//
//	closed --FailureThreshold failures--> open --OpenFor passed, next Allow--> half_open
//	half_open --HalfOpenProbes successes--> closed
//	half_open --any probe failure--> open
//
// Usage, with one breaker per endpoint from a [Set]:
//
//	set, err := breaker.NewSet(breaker.DefaultConfig(), time.Now, logger, reg)
//	...
//	b := set.Get(addr)
//	done, err := b.Allow()
//	if err != nil {
//		return fallback() // breaker.ErrOpen: do not call addr
//	}
//	resp, err := call(ctx, addr)
//	if ctx.Err() != nil {
//		done(nil) // our caller gave up; not addr's fault
//	} else {
//		done(err)
//	}
//
// The caller's duties:
//
//   - After a nil error from [Breaker.Allow], call done exactly once with the
//     call's outcome. A probe whose done is never called keeps its half-open
//     slot, and the breaker can then never close. Extra calls are ignored.
//   - Blame only the dependency: report done(nil) for the caller's own
//     cancellation and for well-formed error replies (a peer saying "not
//     owner" is healthy). Report transport errors and the call's own
//     deadline expiring as failures.
//   - Decide what a rejected call means: fall back (local decision, fail
//     open or closed by policy) rather than retry in a loop.
//   - Call [Set.Forget] when a peer leaves, so its metric series go away.
//
// Time comes from the injected clock and is read only in Allow and on
// transitions. Everything is safe for concurrent use. While closed, Allow
// is one atomic load and done one compare-and-swap; no lock is taken.
package breaker
