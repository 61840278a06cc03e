// Package limiter is weir's decision core: it resolves a request's
// descriptors against the active policy into limit keys, decides them
// atomically with GCRA through a Store (in memory, or Redis), and reports a
// Decision with one entry per matched limit.
//
// One request charges each distinct key once. A composite decision asks
// whether every one of a set of limits admits the request; naming the same
// limit key twice asks the same question twice and must not double the
// request's cost. Resolve never yields a key twice (a limit's name is part
// of its key); DecideMatches drops repeated keys before deciding, so the
// memory store and Redis (whose script refuses a repeated key) agree.
// Envoy RLS is different by protocol: each descriptor of a
// ShouldRateLimit call is its own check (envoyrls decides them one by one,
// as envoyproxy/ratelimit does), so two identical descriptors in one call
// are charged twice.
//
// Failure policy: when the store cannot decide (it returns an
// *UnavailableError), each limit's on_failure decides: closed denies, open
// admits, local decides on this node alone at its fallback limit (see
// policy.Match.FallbackLimit), capped by WithFallbackPart at this node's
// share of the part of the limit its cluster holds when the limit is
// shared with other clusters (a scope: global limit between regions).
//
// Concurrency limits and reservations (issue 26): a limit whose
// decide.Def has Concurrency counts live permits, not a rate; its key goes
// to the store beside the rate keys with the permit bound as its
// gcra.Limit (decide.PermitLimit). A request with a concurrency limit, or
// with Reserve, carries a decide.Grant the limiter owns (plain requests
// allocate nothing for it), and an admitted Decision carries the store's
// Permit and Reservation tokens; a denial, and an admission by a failure
// policy, carry neither. Reserve is refused when an enforced limit it
// matches is strict or global. Under fallback a concurrency limit is open
// (admitted, no permit) or closed, never local, and never fallback debt.
// Release, Renew and Settle decode a token (package ticket), resolve its
// keys through the current policy and send the store a decide.Request
// with Op and Cost 0; an unknown token is an answer (not done), a
// malformed one ErrInvalidRequest, a store failure an *UnavailableError
// with no failure policy applied.
//
// Time: the limiter stamps each request once in Unix nanoseconds (gcra's
// time base) and reports durations as time.Duration.
package limiter
