package httplimit

import (
	"context"
	"errors"
	"net/http"
	"time"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
)

// Decider asks weir for a decision. Any weir.v1 client satisfies it through
// FromClient; tests can supply their own. Implementations must be safe for
// concurrent use.
type Decider interface {
	Decide(ctx context.Context, in *weirv1.DecideRequest) (*weirv1.DecideResponse, error)
}

// FromClient adapts a weir.v1 gRPC client to a Decider.
func FromClient(c weirv1.RateLimiterClient) Decider {
	return clientDecider{c: c}
}

type clientDecider struct{ c weirv1.RateLimiterClient }

func (d clientDecider) Decide(ctx context.Context, in *weirv1.DecideRequest) (*weirv1.DecideResponse, error) {
	return d.c.Decide(ctx, in)
}

// ErrorPolicy says what the middleware does when weir cannot be asked.
type ErrorPolicy int

const (
	// FailOpen serves the request as if weir had allowed it. The default:
	// a limiter outage should not become an application outage.
	FailOpen ErrorPolicy = iota
	// FailClosed refuses the request with 429 and Retry-After: 1. For
	// endpoints where an unlimited caller is worse than no caller (logins).
	FailClosed
)

// DefaultTimeout bounds one call to weir when no WithTimeout is given.
const DefaultTimeout = 50 * time.Millisecond

// Option configures Middleware.
type Option func(*config)

type config struct {
	policy  ErrorPolicy
	timeout time.Duration
	onError func(*http.Request, error)
}

// newConfig is the defaults with opts applied.
func newConfig(opts []Option) config {
	cfg := config{policy: FailOpen, timeout: DefaultTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

// WithErrorPolicy sets what happens when weir cannot be asked; FailOpen by
// default.
func WithErrorPolicy(p ErrorPolicy) Option {
	return func(c *config) { c.policy = p }
}

// WithTimeout bounds each call to weir (DefaultTimeout otherwise). The
// request's own context still applies; zero or negative adds no bound of
// its own.
func WithTimeout(d time.Duration) Option {
	return func(c *config) { c.timeout = d }
}

// WithErrorHook calls fn, before the error policy applies, whenever weir
// cannot be asked. fn must be safe for concurrent use and must not write
// the response.
func WithErrorHook(fn func(r *http.Request, err error)) Option {
	return func(c *config) { c.onError = fn }
}

// errNoResponse is reported when a Decider returns neither a response nor
// an error.
var errNoResponse = errors.New("httplimit: decider returned no response")

// Middleware returns a wrapper that asks d about every request before next
// runs. describe turns a request into descriptors and a cost (0 means 1);
// ok=false serves the request without asking. An allowed request gets the
// rate limit fields (see WriteHeaders) and goes to next; a denied one is
// answered 429 with those fields and a short text body, and next does not
// run. When d fails, the ErrorPolicy decides (see the package
// documentation). Middleware panics if d or describe is nil.
func Middleware(d Decider, describe func(*http.Request) (descriptors map[string]string, cost int64, ok bool), opts ...Option) func(http.Handler) http.Handler {
	if d == nil || describe == nil {
		panic("httplimit: Middleware needs a Decider and a describe function")
	}
	cfg := newConfig(opts)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			descriptors, cost, ok := describe(r)
			if !ok {
				next.ServeHTTP(w, r)
				return
			}
			resp, err := cfg.ask(r.Context(), d, &weirv1.DecideRequest{Descriptors: descriptors, Cost: weirv1.DefaultCost(cost)})
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

// ask calls d under the configured timeout.
func (c *config) ask(ctx context.Context, d Decider, in *weirv1.DecideRequest) (*weirv1.DecideResponse, error) {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	resp, err := d.Decide(ctx, in)
	if err == nil && resp == nil {
		err = errNoResponse
	}
	return resp, err
}

// failed applies the error policy after weir could not be asked.
func (c *config) failed(w http.ResponseWriter, r *http.Request, next http.Handler, err error) {
	if c.onError != nil {
		c.onError(r, err)
	}
	if c.policy == FailClosed {
		w.Header().Set(FallbackField, "closed")
		w.Header().Set(RetryAfterField, "1")
		deny(w, false)
		return
	}
	w.Header().Set(FallbackField, "open")
	next.ServeHTTP(w, r)
}

// deny writes the 429 answer; the rate limit fields are already set.
func deny(w http.ResponseWriter, tooCostly bool) {
	msg := "rate limit exceeded"
	if tooCostly {
		msg = "request exceeds the rate limit and can never pass"
	}
	http.Error(w, msg, http.StatusTooManyRequests)
}
