package httplimit

import (
	"context"
	"net/http"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
)

// Acquirer holds weir concurrency permits. *client.Client satisfies it
// (this package imports no weir client; see docs/architecture.md).
//
// Acquire decides a request with these descriptors; when it is admitted
// with a permit, the permit is held (and renewed) until release is
// called, whether or not ctx has ended by then: ctx bounds the decision
// only. release must never be nil, must be safe to call more than once,
// and must not panic. A denial or an error comes with a release that does
// nothing. Implementations must be safe for concurrent use.
type Acquirer interface {
	Acquire(ctx context.Context, descriptors map[string]string) (release func(), resp *weirv1.DecideResponse, err error)
}

// ConcurrencyMiddleware returns a wrapper that acquires a permit from a
// before next runs and releases it when next returns, by a deferred call,
// so that a handler that panics releases too (the panic then goes on up,
// as without the middleware). Use it for the routes that match a
// concurrency limit (kind: concurrency in the policy): at most
// max_in_flight of their requests run at once.
//
// describe is Middleware's: descriptors and ok as there; the cost is not
// used (a request holds one slot, and costs 1 on the rate limits its
// descriptors also match). A denied request is answered 429 with the rate
// limit fields and Retry-After (the wait until enough permits expire;
// one released earlier frees its slot sooner), and next does not run.
// When a cannot be asked (an error, or the timeout of WithTimeout), the
// ErrorPolicy decides as in Middleware; a request served by FailOpen holds
// no permit. Options are Middleware's. The release runs before the
// response ends, so a client that waits for its response before sending
// the next request finds its slot free. ConcurrencyMiddleware panics if a
// or describe is nil.
func ConcurrencyMiddleware(a Acquirer, describe func(*http.Request) (descriptors map[string]string, cost int64, ok bool), opts ...Option) func(http.Handler) http.Handler {
	if a == nil || describe == nil {
		panic("httplimit: ConcurrencyMiddleware needs an Acquirer and a describe function")
	}
	cfg := newConfig(opts)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			descriptors, _, ok := describe(r)
			if !ok {
				next.ServeHTTP(w, r)
				return
			}
			release, resp, err := cfg.acquire(r.Context(), a, descriptors)
			if release != nil {
				defer release() // a no-op unless a permit is held
			}
			if err != nil {
				cfg.failed(w, r, next, err)
				return
			}
			if !admit(w, resp) {
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// acquire calls a under the configured timeout.
func (c *config) acquire(ctx context.Context, a Acquirer, descriptors map[string]string) (func(), *weirv1.DecideResponse, error) {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	release, resp, err := a.Acquire(ctx, descriptors)
	if err == nil && resp == nil {
		err = errNoResponse
	}
	return release, resp, err
}

// admit writes resp's fields and, for a denial, the 429 answer; it
// reports whether the request may go on to the handler.
func admit(w http.ResponseWriter, resp *weirv1.DecideResponse) bool {
	h := w.Header()
	WriteHeaders(h, resp)
	if fb := resp.GetFallback(); fb != nil {
		h.Set(FallbackField, fb.GetMode())
	}
	if !resp.GetAllowed() {
		deny(w, resp.GetTooCostly())
		return false
	}
	return true
}
