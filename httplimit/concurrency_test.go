package httplimit

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
)

// fakeAcquirer answers Acquire with resp/err and a release that counts its
// calls; block makes Acquire wait for its context to end.
type fakeAcquirer struct {
	resp  *weirv1.DecideResponse
	err   error
	block bool

	mu       sync.Mutex
	asked    []map[string]string
	released int
}

var _ Acquirer = (*fakeAcquirer)(nil)

func (f *fakeAcquirer) Acquire(ctx context.Context, d map[string]string) (func(), *weirv1.DecideResponse, error) {
	f.mu.Lock()
	f.asked = append(f.asked, d)
	f.mu.Unlock()
	if f.block {
		<-ctx.Done()
		return func() {}, nil, ctx.Err()
	}
	if f.err != nil || !f.resp.GetAllowed() {
		return func() {}, f.resp, f.err
	}
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.released++
	}, f.resp, nil
}

func (f *fakeAcquirer) counts() (asked, released int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.asked), f.released
}

func admitted() *weirv1.DecideResponse {
	return &weirv1.DecideResponse{Allowed: true, Matched: true, Remaining: 1, Permit: []byte("p"),
		Limits: []*weirv1.LimitStatus{{Name: "exports", Kind: "concurrency", Allowed: true, Remaining: 1, InFlight: 1,
			Burst: 2, Window: dur(30 * time.Second), ResetAfter: dur(30 * time.Second)}}}
}

// serveConcurrent runs one request (tenant set unless empty) through
// ConcurrencyMiddleware(a, byTenant, opts...) around app, in-process, so
// that a panic reaches the test.
func serveConcurrent(a Acquirer, tenant string, app http.HandlerFunc, opts ...Option) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, "/export", nil)
	if tenant != "" {
		req.Header.Set("X-Tenant", tenant)
	}
	rec := httptest.NewRecorder()
	ConcurrencyMiddleware(a, byTenant, opts...)(app).ServeHTTP(rec, req)
	return rec
}

func TestConcurrencyMiddleware_releasesAfterTheHandler(t *testing.T) {
	a := &fakeAcquirer{resp: admitted()}
	var during int
	rec := serveConcurrent(a, "acme", func(w http.ResponseWriter, r *http.Request) {
		_, during = a.counts()
		w.WriteHeader(http.StatusAccepted)
	})
	if rec.Code != http.StatusAccepted {
		t.Fatalf("status %d, want the app's 202", rec.Code)
	}
	if asked, released := a.counts(); asked != 1 || during != 0 || released != 1 {
		t.Errorf("asked %d, released %d during the handler and %d after; want 1, 0, 1", asked, during, released)
	}
	if got, want := rec.Header().Get(RateLimitPolicyField), `"exports";q=2;w=30`; got != want {
		t.Errorf("%s = %q, want %q", RateLimitPolicyField, got, want)
	}
	if got := a.asked[0]["tenant"]; got != "acme" {
		t.Errorf("asked for tenant %q", got)
	}
}

func TestConcurrencyMiddleware_panicReleasesAndPropagates(t *testing.T) {
	a := &fakeAcquirer{resp: admitted()}
	var recovered any
	func() {
		defer func() { recovered = recover() }()
		serveConcurrent(a, "acme", func(http.ResponseWriter, *http.Request) { panic("boom") })
	}()
	if recovered != "boom" {
		t.Errorf("recovered %v, want the handler's panic", recovered)
	}
	if _, released := a.counts(); released != 1 {
		t.Errorf("released %d times after a panic, want 1", released)
	}
}

func TestConcurrencyMiddleware_deniedAnswers429(t *testing.T) {
	resp := &weirv1.DecideResponse{Matched: true, RetryAfter: dur(2500 * time.Millisecond),
		Limits: []*weirv1.LimitStatus{{Name: "exports", Kind: "concurrency", InFlight: 2, Burst: 2,
			Window: dur(30 * time.Second), RetryAfter: dur(2500 * time.Millisecond), ResetAfter: dur(29 * time.Second)}}}
	a := &fakeAcquirer{resp: resp}
	ran := false
	rec := serveConcurrent(a, "acme", func(http.ResponseWriter, *http.Request) { ran = true })
	if ran || rec.Code != http.StatusTooManyRequests {
		t.Fatalf("ran=%v status=%d, want 429 without the app", ran, rec.Code)
	}
	for field, want := range map[string]string{
		RetryAfterField:      "3",
		RateLimitField:       `"exports";r=0;t=3`,
		RateLimitPolicyField: `"exports";q=2;w=30`,
	} {
		if got := rec.Header().Get(field); got != want {
			t.Errorf("%s = %q, want %q", field, got, want)
		}
	}
}

func TestConcurrencyMiddleware_errorPolicies(t *testing.T) {
	for _, tc := range []struct {
		name     string
		a        *fakeAcquirer
		opts     []Option
		ran      bool
		code     int
		fallback string
		wantErr  error
	}{
		{name: "fails open", a: &fakeAcquirer{err: errors.New("refused")}, ran: true, code: 200, fallback: "open"},
		{name: "fails closed", a: &fakeAcquirer{err: errors.New("refused")}, opts: []Option{WithErrorPolicy(FailClosed)},
			code: 429, fallback: "closed"},
		{name: "timeout", a: &fakeAcquirer{block: true}, opts: []Option{WithTimeout(time.Millisecond), WithErrorPolicy(FailClosed)},
			code: 429, fallback: "closed", wantErr: context.DeadlineExceeded},
		{name: "no response", a: &fakeAcquirer{}, ran: true, code: 200, fallback: "open", wantErr: errNoResponse},
	} {
		var hooked error
		opts := append(tc.opts, WithErrorHook(func(_ *http.Request, err error) { hooked = err }))
		ran := false
		rec := serveConcurrent(tc.a, "acme", func(http.ResponseWriter, *http.Request) { ran = true }, opts...)
		if ran != tc.ran || rec.Code != tc.code || rec.Header().Get(FallbackField) != tc.fallback {
			t.Errorf("%s: ran=%v status=%d %s=%q; want %v %d %q", tc.name, ran, rec.Code,
				FallbackField, rec.Header().Get(FallbackField), tc.ran, tc.code, tc.fallback)
		}
		if hooked == nil || tc.wantErr != nil && !errors.Is(hooked, tc.wantErr) {
			t.Errorf("%s: hook got %v, want %v", tc.name, hooked, tc.wantErr)
		}
		if tc.code == 429 && rec.Header().Get(RetryAfterField) != "1" {
			t.Errorf("%s: Retry-After %q, want 1", tc.name, rec.Header().Get(RetryAfterField))
		}
	}
}

func TestConcurrencyMiddleware_passThroughAndFallback(t *testing.T) {
	a := &fakeAcquirer{resp: admitted()}
	ran := false
	serveConcurrent(a, "", func(http.ResponseWriter, *http.Request) { ran = true })
	if asked, _ := a.counts(); !ran || asked != 0 {
		t.Errorf("undescribed request: ran=%v, asked %d; want served without asking", ran, asked)
	}
	fb := &fakeAcquirer{resp: &weirv1.DecideResponse{Allowed: true, Matched: true,
		Fallback: &weirv1.Fallback{Mode: "open", Reason: "owner_unreachable"}}}
	rec := serveConcurrent(fb, "acme", func(http.ResponseWriter, *http.Request) {})
	if rec.Code != 200 || rec.Header().Get(FallbackField) != "open" {
		t.Errorf("weir's fallback: status %d %s=%q; want 200 open", rec.Code, FallbackField, rec.Header().Get(FallbackField))
	}
}

func TestConcurrencyMiddleware_nilArgumentsPanic(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic for a nil Acquirer")
		}
	}()
	ConcurrencyMiddleware(nil, byTenant)
}
