package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/limiter"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeDecider stands in for the limiter core. It reads its answer from the
// request's descriptors:
//
//	fail=invalid   an error wrapping limiter.ErrInvalidRequest
//	fail=down      a plain error (the node cannot decide)
//	fail=deadline  context.DeadlineExceeded, wrapped
//	fail=canceled  context.Canceled, wrapped
//	fail=block     waits for the context to end and returns its error
//	user=blocked   a denial by the "per-user" limit
//	cost > 10      too_costly
//	anything else  allowed by "per-user", with a shadow "trial" limit
//
// It records every request it decides.
type fakeDecider struct {
	// batchShort makes DecideBatch drop its last decision.
	batchShort bool

	mu    sync.Mutex
	calls []limiter.Request
}

var _ Decider = (*fakeDecider)(nil)

func (f *fakeDecider) Decide(ctx context.Context, r limiter.Request) (limiter.Decision, error) {
	f.mu.Lock()
	f.calls = append(f.calls, r)
	f.mu.Unlock()
	return fakeDecision(ctx, r)
}

func (f *fakeDecider) DecideBatch(ctx context.Context, rs []limiter.Request) ([]limiter.Decision, error) {
	f.mu.Lock()
	f.calls = append(f.calls, rs...)
	f.mu.Unlock()
	out := make([]limiter.Decision, 0, len(rs))
	for i, r := range rs {
		d, err := fakeDecision(ctx, r)
		if err != nil {
			return nil, fmt.Errorf("requests[%d]: %w", i, err)
		}
		out = append(out, d)
	}
	if f.batchShort {
		out = out[:len(out)-1]
	}
	return out, nil
}

func (f *fakeDecider) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func fakeDecision(ctx context.Context, r limiter.Request) (limiter.Decision, error) {
	switch r.Descriptors["fail"] {
	case "invalid":
		return limiter.Decision{}, fmt.Errorf("%w: unknown descriptor %q", limiter.ErrInvalidRequest, "fail")
	case "down":
		return limiter.Decision{}, errors.New("store: redis unavailable")
	case "deadline":
		return limiter.Decision{}, fmt.Errorf("store: %w", context.DeadlineExceeded)
	case "canceled":
		return limiter.Decision{}, fmt.Errorf("store: %w", context.Canceled)
	case "block":
		<-ctx.Done()
		return limiter.Decision{}, ctx.Err()
	}
	user := limiter.LimitDecision{
		Name: "per-user", Key: "weir:{acme}:per-user:" + r.Descriptors["user"],
		Allowed: true, Remaining: 3, Burst: 5, Window: time.Second,
		ResetAfter: 400 * time.Millisecond,
	}
	trial := limiter.LimitDecision{
		Name: "trial", Key: "weir:{acme}:trial", Shadow: true, Burst: 1, Window: time.Minute,
		RetryAfter: 30 * time.Second, ResetAfter: time.Minute,
	}
	d := limiter.Decision{Allowed: true, Matched: true, Remaining: 3, ResetAfter: 400 * time.Millisecond, PolicyVersion: "v7"}
	switch {
	case r.Cost > 10:
		user.Allowed, user.TooCostly, user.ResetAfter = false, true, 0
		d = limiter.Decision{Matched: true, TooCostly: true, PolicyVersion: "v7"}
	case r.Descriptors["user"] == "blocked":
		user.Allowed, user.Remaining = false, 0
		user.RetryAfter, user.ResetAfter = 1500*time.Millisecond, 2*time.Second
		d = limiter.Decision{Matched: true, RetryAfter: 1500 * time.Millisecond, ResetAfter: 2 * time.Second, PolicyVersion: "v7"}
	}
	d.Limits = []limiter.LimitDecision{user, trial}
	return d, nil
}

// withTimeout is a test context that ends with the test.
func withTimeout(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
