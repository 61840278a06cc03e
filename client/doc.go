// Package client is a Go client for weir's gRPC API, weir.v1.RateLimiter:
// it asks a weir node whether a request may pass.
//
// Usage:
//
//	cfg := client.DefaultConfig()
//	cfg.Target = "127.0.0.1:8081"
//	cfg.BatchWindow = 200 * time.Microsecond // coalesce concurrent calls
//	c, err := client.New(cfg)
//	if err != nil {
//		return err
//	}
//	defer c.Close()
//
//	resp, err := c.Decide(ctx, map[string]string{"tenant": "acme", "user": "u7"}, 1)
//	switch {
//	case err != nil:
//		// weir did not answer in time: apply your own failure policy.
//	case !resp.GetAllowed():
//		// reject; resp.GetRetryAfter() says when to try again.
//	}
//
// With Config.BatchWindow > 0, concurrent Decide calls are coalesced into one
// DecideBatch RPC, sent when Config.MaxBatch requests are waiting or the
// window has passed since the first of them, whichever comes first. Each
// caller still gets its own response and returns as soon as its own context
// ends. Batching trades up to one window of latency for far fewer RPCs under
// load; leave it off for light or latency-critical traffic. DecideBatch sends
// a caller-built batch as it is and is never coalesced.
//
// With Config.Route the client sends each request straight to its group's
// owner instead of to Target, which would forward two thirds of a
// three-node cluster's spread traffic: it reads the cluster's topology
// (weir.v1 Topology) from Target, keeps one connection per member, and
// re-reads the topology when an answer's ring epoch or policy version
// differs from its own, when a member fails, and every RouteRefresh.
// Requests it cannot place, and those whose owner is UNAVAILABLE, go to
// Target; answers are the same either way. RouteEpoch tells whether it
// routes. See docs/architecture.md, "Client routing".
//
// # Client-side leases
//
// With Config.Leases the client holds leases of the policy's hot leasable
// limits and decides them in this process, with no RPC per decision:
//
//	cfg.Leases = &client.LeaseConfig{} // the defaults
//
// The first Decide of a descriptor set goes over Decide as without leases,
// and the client asks Target (weir.v1.Leases, one stream: one lease
// holder, named by the node) whether the set is leasable and on which
// terms; the policy decides, never the client. A set whose every limit is
// leasable is then decided with lease.Holder, the accounting a peer node
// uses: units held per key, spent all-or-nothing across a request's
// limits, refused locally from the owner's last denial, one batched
// refresh per LeaseConfig.Tick carrying every key's demand and returning
// its unspent units, granted by the keys' owners through Target. Across
// any number of client processes and nodes a key admits at most B + W/T
// in any window W, as at a node. Answers decided here say
// DecideResponse.from_lease, as a node's do.
//
// A request goes over Decide (and from there to the limit's failure
// policy, as without leases) when its descriptors are not leasable or not
// known yet, when its lease is dry and the refresh it waits for does not
// come within its budget (half of Config.Timeout, at most RefreshTimeout),
// when refreshes go unanswered, and while the stream to Target is down
// (reopened with backoff, as a new holder; the old holder's units strand
// at their owners for one TTL). DecideBatch is never decided from leases.
// Shutdown (and Close) gives every unspent unit back before closing.
// LeaseStats counts decisions from leases and RPCs of both kinds.
//
// # Concurrency permits and reservations
//
// A concurrency limit (kind: concurrency in the policy) bounds the
// requests in flight rather than their rate. Acquire asks once and, when
// admitted, holds the answer's permit until release:
//
//	release, resp, err := c.Acquire(ctx, map[string]string{"tenant": "acme", "op": "export"})
//	switch {
//	case err != nil:
//		// weir did not answer: apply your own failure policy.
//	case !resp.GetAllowed():
//		// busy; resp.GetRetryAfter() is the wait until enough permits expire.
//	default:
//		defer release() // idempotent; also on panic
//		runExport()
//	}
//
// While held, a goroutine renews the permit every third of its TTL (the
// window of the answer's concurrency limits), so work may outlive one
// TTL; a renewal the owner answers with renewed: false (the permit
// expired, or its owner crashed without Redis) stops renewing and tells
// Config.OnPermitError, wrapping ErrPermitLost. release sends Release
// with a timeout of its own, so it works after the caller's context has
// ended. A caller that crashes leaves its slots held until their TTL.
//
// Reserve charges a request's most cost now and returns settle, which
// charges its actual cost once known (refunding the rest, or charging an
// excess): reserve the most tokens an LLM call may use, settle what it
// used. An unsettled reservation stays charged as reserved.
//
// Release, Renew and Settle are the plain calls on a token
// (DecideResponse.permit or reservation), for callers that keep tokens
// themselves. Acquire, Reserve and these never go through batching or
// leases (a permit is the caller's own, decided at the owner); with
// Config.Route, Acquire and Reserve go to their descriptors' owner and
// the calls on a token to the owner of its group (ticket.Group), or to
// Target when the client cannot place it.
//
// Transport security: a node started with --tls-cert takes TLS clients; set
// Config.TLS (CA bundle, and a client certificate when the node requires
// one with --tls-client-ca). The client re-reads those files when they
// change. Without Config.TLS the connection is plaintext. The same
// credentials and dial options apply to every member connection.
//
// The caller's duties:
//
//   - Create one Client and share it; it is safe for concurrent use.
//   - Decide what an error means for the request (fail open or closed): the
//     client never guesses an answer, and retries only a routed call whose
//     member was UNAVAILABLE, once, through Target (see Config.Route).
//   - Keep Config.Timeout short; it applies inside the caller's context, so a
//     shorter deadline on ctx still wins.
//   - Call every release Acquire returned once the work ends, and
//     settle every reservation; before Close, which stops renewing held
//     permits (their slots come back at their TTL) and after which
//     release cannot send.
//   - Call Close (or Shutdown with your own deadline) once done. It
//     returns leased units, fails pending calls with ErrClosed and
//     returns after the client's goroutines have ended.
package client
