package httplimit

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeDecider answers with resp/err and records what it was asked.
type fakeDecider struct {
	resp *weirv1.DecideResponse
	err  error
	// block makes Decide wait for its context to end.
	block bool

	mu    sync.Mutex
	calls []*weirv1.DecideRequest
}

func (f *fakeDecider) Decide(ctx context.Context, in *weirv1.DecideRequest) (*weirv1.DecideResponse, error) {
	f.mu.Lock()
	f.calls = append(f.calls, in)
	f.mu.Unlock()
	if f.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return f.resp, f.err
}

func (f *fakeDecider) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

var _ Decider = (*fakeDecider)(nil)

func byTenant(r *http.Request) (map[string]string, int64, bool) {
	tenant := r.Header.Get("X-Tenant")
	if tenant == "" {
		return nil, 0, false
	}
	return map[string]string{"tenant": tenant}, 2, true
}

// serve runs one GET through Middleware(d, byTenant, opts...) around a
// handler that answers 200 "app", and reports whether the handler ran.
func serve(t *testing.T, d Decider, tenant string, opts ...Option) (*http.Response, string, bool) {
	t.Helper()
	var ran bool
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran = true
		io.WriteString(w, "app")
	})
	srv := httptest.NewServer(Middleware(d, byTenant, opts...)(app))
	t.Cleanup(srv.Close)
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tenant != "" {
		req.Header.Set("X-Tenant", tenant)
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(body), ran
}

func TestMiddleware_allowed(t *testing.T) {
	d := &fakeDecider{resp: &weirv1.DecideResponse{
		Allowed: true, Matched: true, Remaining: 7,
		Limits: []*weirv1.LimitStatus{{Name: "t", Allowed: true, Remaining: 7, Burst: 10, Window: dur(10 * time.Second), ResetAfter: dur(3 * time.Second)}},
	}}
	res, body, ran := serve(t, d, "acme")
	if !ran || res.StatusCode != http.StatusOK || body != "app" {
		t.Fatalf("ran=%v status=%d body=%q, want the app's 200", ran, res.StatusCode, body)
	}
	if got, want := res.Header.Get("RateLimit"), `"t";r=7;t=3`; got != want {
		t.Errorf("RateLimit = %q, want %q", got, want)
	}
	if got, want := res.Header.Get("RateLimit-Policy"), `"t";q=10;w=10`; got != want {
		t.Errorf("RateLimit-Policy = %q, want %q", got, want)
	}
	if got := res.Header.Get(FallbackField); got != "" {
		t.Errorf("%s = %q on a normal decision", FallbackField, got)
	}
	if got := d.calls[0]; got.GetDescriptors()["tenant"] != "acme" || got.GetCost() != 2 {
		t.Errorf("asked %v, want tenant=acme cost=2", got)
	}
}

func TestMiddleware_denied(t *testing.T) {
	d := &fakeDecider{resp: deniedResponse()}
	res, body, ran := serve(t, d, "acme")
	if ran {
		t.Error("the app ran for a denied request")
	}
	if res.StatusCode != http.StatusTooManyRequests {
		t.Errorf("status = %d, want 429", res.StatusCode)
	}
	if body != "rate limit exceeded\n" {
		t.Errorf("body = %q", body)
	}
	if got := res.Header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After = %q, want 1", got)
	}
	if got, want := res.Header.Get("RateLimit"), `"per-tenant";r=180;t=1, "per-user";r=0;t=1`; got != want {
		t.Errorf("RateLimit = %q, want %q", got, want)
	}
}

func TestMiddleware_deniedTooCostly(t *testing.T) {
	d := &fakeDecider{resp: &weirv1.DecideResponse{Matched: true, TooCostly: true}}
	res, _, ran := serve(t, d, "acme")
	if ran || res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("ran=%v status=%d, want 429 without the app", ran, res.StatusCode)
	}
	if _, ok := res.Header["Retry-After"]; ok {
		t.Error("Retry-After set for too_costly")
	}
}

func TestMiddleware_passThroughWithoutAsking(t *testing.T) {
	d := &fakeDecider{err: errors.New("must not be called")}
	res, _, ran := serve(t, d, "")
	if !ran || res.StatusCode != http.StatusOK {
		t.Fatalf("ran=%v status=%d, want the app's 200", ran, res.StatusCode)
	}
	if n := d.callCount(); n != 0 {
		t.Errorf("weir asked %d times, want 0", n)
	}
}

func TestMiddleware_errorFailsOpenByDefault(t *testing.T) {
	var hooked error
	d := &fakeDecider{err: errors.New("connection refused")}
	res, _, ran := serve(t, d, "acme", WithErrorHook(func(_ *http.Request, err error) { hooked = err }))
	if !ran || res.StatusCode != http.StatusOK {
		t.Fatalf("ran=%v status=%d, want the app's 200", ran, res.StatusCode)
	}
	if got := res.Header.Get(FallbackField); got != "open" {
		t.Errorf("%s = %q, want open", FallbackField, got)
	}
	if hooked == nil {
		t.Error("error hook not called")
	}
}

func TestMiddleware_errorFailsClosed(t *testing.T) {
	d := &fakeDecider{err: errors.New("connection refused")}
	res, _, ran := serve(t, d, "acme", WithErrorPolicy(FailClosed))
	if ran || res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("ran=%v status=%d, want 429 without the app", ran, res.StatusCode)
	}
	if got := res.Header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After = %q, want 1", got)
	}
	if got := res.Header.Get(FallbackField); got != "closed" {
		t.Errorf("%s = %q, want closed", FallbackField, got)
	}
}

func TestMiddleware_timeoutIsAnError(t *testing.T) {
	var hooked error
	d := &fakeDecider{block: true}
	res, _, ran := serve(t, d, "acme", WithTimeout(time.Millisecond), WithErrorPolicy(FailClosed),
		WithErrorHook(func(_ *http.Request, err error) { hooked = err }))
	if ran || res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("ran=%v status=%d, want 429", ran, res.StatusCode)
	}
	if !errors.Is(hooked, context.DeadlineExceeded) {
		t.Errorf("hooked error = %v, want deadline exceeded", hooked)
	}
}

func TestMiddleware_nilResponseIsAnError(t *testing.T) {
	res, _, ran := serve(t, &fakeDecider{}, "acme")
	if !ran || res.Header.Get(FallbackField) != "open" {
		t.Fatalf("ran=%v header=%v, want a fail-open pass", ran, res.Header)
	}
}

func TestMiddleware_weirFallbackIsMarked(t *testing.T) {
	d := &fakeDecider{resp: &weirv1.DecideResponse{Allowed: true, Matched: true,
		Fallback: &weirv1.Fallback{Mode: "local", Reason: "owner_unreachable"}}}
	res, _, ran := serve(t, d, "acme")
	if !ran || res.Header.Get(FallbackField) != "local" {
		t.Fatalf("ran=%v %s=%q, want local", ran, FallbackField, res.Header.Get(FallbackField))
	}
}

// stubClient is a weir.v1 client whose Decide answers resp.
type stubClient struct {
	weirv1.RateLimiterClient
	resp *weirv1.DecideResponse
}

func (s stubClient) Decide(context.Context, *weirv1.DecideRequest, ...grpc.CallOption) (*weirv1.DecideResponse, error) {
	return s.resp, nil
}

func TestFromClient(t *testing.T) {
	want := &weirv1.DecideResponse{Allowed: true}
	got, err := FromClient(stubClient{resp: want}).Decide(context.Background(), &weirv1.DecideRequest{})
	if err != nil || got != want {
		t.Fatalf("Decide = %v, %v; want the client's answer", got, err)
	}
}
