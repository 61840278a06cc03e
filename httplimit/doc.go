// Package httplimit tells HTTP clients what a weir decision means for them,
// and wraps an http.Handler so that every request is decided by weir first.
//
// # Signalling
//
// WriteHeaders turns a weir.v1 DecideResponse into response header fields
// (Fields returns their values, for a carrier other than an http.Header):
//
//   - RateLimit-Policy and RateLimit, pinned to
//     draft-ietf-httpapi-ratelimit-headers-11 (RateLimit header fields for
//     HTTP). Each is a Structured Field List (RFC 8941) with one member per
//     enforced limit; shadow limits are never advertised. A member's value
//     is the limit's name as an sf-string; its parameters are
//     RateLimit-Policy: q (the burst) and w (the window, whole seconds
//     rounded up, at least 1); RateLimit: r (units left) and t (seconds
//     until the limit is fully rested, rounded up).
//
//   - Retry-After (RFC 9110, section 10.2.3) on a denial: the exact wait
//     rounded up to whole seconds, never less than 1. A request whose cost
//     exceeds a limit's burst (too_costly) can never pass, so it gets no
//     Retry-After: waiting would not help.
//
// A denial by a limit of 20 per second with burst 20, right after the burst
// was spent:
//
//	HTTP/1.1 429 Too Many Requests
//	RateLimit-Policy: "per-user";q=20;w=1
//	RateLimit: "per-user";r=0;t=1
//	Retry-After: 1
//
// StatusCode maps a decision to 200 or 429 (RFC 6585). It never answers 503:
// shedding load when a service is overloaded is a different job from
// enforcing a caller's allowance, and mixing them makes limits too tight.
//
// The draft's syntax changed more than once between revisions; a
// client that parses these fields should expect revision 11.
//
// # Middleware
//
//	d := httplimit.FromClient(weirv1.NewRateLimiterClient(conn))
//	describe := func(r *http.Request) (map[string]string, int64, bool) {
//		tenant := r.Header.Get("X-Tenant")
//		if tenant == "" {
//			return nil, 0, false // not limited: pass through
//		}
//		return map[string]string{"tenant": tenant, "route": r.URL.Path}, 1, true
//	}
//	http.Handle("/", httplimit.Middleware(d, describe)(app))
//
// When weir cannot be asked (an error or the per-call timeout, 50ms by
// default) the middleware follows its ErrorPolicy: FailOpen (the default)
// serves the request, FailClosed answers 429 with Retry-After: 1. Either
// way the response carries the Weir-Fallback field ("open" or "closed"),
// which is also set, to the mode weir reports, when weir's own failure
// policy made the decision. Use WithErrorHook to count or log these errors:
// a silent fail-open looks exactly like healthy traffic.
//
// # Concurrency limits
//
// ConcurrencyMiddleware bounds the requests in flight on routes that match
// a concurrency limit: it acquires a permit (from an Acquirer, such as
// *client.Client) before the handler and releases it with a deferred call
// when the handler returns or panics. A denial is 429 with Retry-After,
// the wait until enough permits expire; errors follow the ErrorPolicy as
// above (a request served by FailOpen holds no permit):
//
//	c, _ := client.New(cfg) // Acquire renews the permit while the handler runs
//	http.Handle("/export", httplimit.ConcurrencyMiddleware(c, describe)(export))
//
// # Caller duties
//
//   - Keep limit names printable ASCII: an sf-string cannot carry other
//     characters, and WriteHeaders replaces each with '?'.
//   - Build descriptors from trusted request attributes; describe runs on
//     every request and must be cheap and safe for concurrent use.
//   - Remove the Weir-Fallback field at the edge if clients must not learn
//     that the limiter is degraded.
//
// Everything in this package is safe for concurrent use.
package httplimit
