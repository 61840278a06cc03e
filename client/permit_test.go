package client_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirhq/weir/client"
	"github.com/weirhq/weir/clock/clocktest"
	"github.com/weirhq/weir/server/servertest"
)

var t0 = time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)

// permitErrors collects what Config.OnPermitError was told.
type permitErrors struct {
	mu   sync.Mutex
	errs []error
	got  chan struct{} // one send (without blocking) per error
}

func (p *permitErrors) record(_ map[string]string, err error) {
	p.mu.Lock()
	p.errs = append(p.errs, err)
	p.mu.Unlock()
	select {
	case p.got <- struct{}{}:
	default:
	}
}

func (p *permitErrors) all() []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]error(nil), p.errs...)
}

// permitClient serves a permitServer (max in flight 2, ttl 30s, 100 units
// of budget) on clk and returns a client whose renewers run on clk too.
func permitClient(t *testing.T, window time.Duration) (*client.Client, *permitServer, *clocktest.Manual, *permitErrors) {
	t.Helper()
	clk := clocktest.NewManual(t0)
	srv := newPermitServer(clk, 2, 30*time.Second, 100)
	pe := &permitErrors{got: make(chan struct{}, 16)}
	cfg := client.DefaultConfig()
	cfg.Target, cfg.Timeout, cfg.Clock, cfg.OnPermitError = servertest.Serve(t, srv), 10*time.Second, clk, pe.record
	cfg.BatchWindow = window
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, srv, clk, pe
}

func waitTimers(t *testing.T, clk *clocktest.Manual, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := clk.WaitForTimers(ctx, n); err != nil {
		t.Fatal(err)
	}
}

func TestClient_Acquire_renewsEveryThirdOfTTL(t *testing.T) {
	// A batching client: Acquire must not wait for a batch window (an
	// hour here) nor share an RPC.
	c, srv, clk, pe := permitClient(t, forever)
	release, resp, err := c.Acquire(t.Context(), map[string]string{"tenant": "acme"})
	if err != nil || !resp.GetAllowed() || len(resp.GetPermit()) == 0 {
		t.Fatalf("Acquire = %v, %v; want admitted with a permit", resp, err)
	}
	// Four renewals carry the permit past its 30s TTL.
	for i := 1; i <= 4; i++ {
		waitTimers(t, clk, 1)
		want := t0.Add(time.Duration(i) * 10 * time.Second)
		if got := clk.Timers(); len(got) != 1 || !got[0].Equal(want) {
			t.Fatalf("renewal %d: timers %v, want one at %v", i, got, want)
		}
		clk.Set(want.Add(-time.Microsecond))
		if got := clk.Timers(); len(got) != 1 || srv.counts().renews != i-1 {
			t.Fatalf("renewal %d: 1µs early: timers %v, %d renewals", i, got, srv.counts().renews)
		}
		clk.Set(want)
		waitFor(t, 10*time.Second, "renewal", func() bool { return srv.counts().renews == i })
	}
	waitTimers(t, clk, 1) // the renewal was answered
	if got := srv.counts(); got.live != 1 {
		t.Fatalf("at %v (past one TTL) the owner holds %d permits, want 1", clk.Now(), got.live)
	}
	release()
	release()
	if got := srv.counts(); got.releases != 1 || got.live != 0 {
		t.Errorf("after release twice: %+v; want one Release and no live permit", got)
	}
	if got := clk.Timers(); len(got) != 0 {
		t.Errorf("renewer timers left after release: %v", got)
	}
	if errs := pe.all(); len(errs) != 0 {
		t.Errorf("OnPermitError told %v", errs)
	}
}

func TestClient_Acquire_releaseAfterCtxEndedAndConcurrently(t *testing.T) {
	c, srv, clk, _ := permitClient(t, 0)
	ctx, cancel := context.WithCancel(t.Context())
	release, _, err := c.Acquire(ctx, map[string]string{"tenant": "acme"})
	if err != nil {
		t.Fatal(err)
	}
	cancel() // the request ended before its work did
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(release)
	}
	wg.Wait()
	if got := srv.counts(); got.releases != 1 || got.live != 0 {
		t.Errorf("after 8 concurrent releases on an ended ctx: %+v; want one Release, nothing live", got)
	}
	clk.Advance(time.Hour)
	if got := srv.counts(); got.renews != 0 {
		t.Errorf("%d renewals after release", got.renews)
	}
}

func TestClient_Acquire_renewedFalseStopsRenewing(t *testing.T) {
	c, srv, clk, pe := permitClient(t, 0)
	release, _, err := c.Acquire(t.Context(), map[string]string{"tenant": "acme"})
	if err != nil {
		t.Fatal(err)
	}
	srv.loseAll() // the owner crashed without Redis
	waitTimers(t, clk, 1)
	clk.Advance(10 * time.Second)
	<-pe.got
	if errs := pe.all(); len(errs) != 1 || !errors.Is(errs[0], client.ErrPermitLost) {
		t.Fatalf("OnPermitError told %v, want one ErrPermitLost", errs)
	}
	waitFor(t, 10*time.Second, "the renewer to stop", func() bool { return len(clk.Timers()) == 0 })
	clk.Advance(time.Hour)
	if got := srv.counts().renews; got != 1 {
		t.Errorf("%d renewals, want 1: renewing goes on after renewed=false", got)
	}
	release() // sent; the owner answers released: false
	if got := srv.counts().releases; got != 1 {
		t.Errorf("%d releases, want 1", got)
	}
	if errs := pe.all(); len(errs) != 2 || !errors.Is(errs[1], client.ErrPermitLost) {
		t.Errorf("OnPermitError told %v, want a second ErrPermitLost from release", errs)
	}
}

func TestClient_Acquire_deniedAndFallbackHoldNothing(t *testing.T) {
	c, srv, clk, _ := permitClient(t, 0)
	acme := map[string]string{"tenant": "acme"}
	for range 2 {
		if _, resp, err := c.Acquire(t.Context(), acme); err != nil || !resp.GetAllowed() {
			t.Fatalf("Acquire = %v, %v", resp, err)
		}
	}
	waitTimers(t, clk, 2)
	clk.Advance(time.Second)
	release, resp, err := c.Acquire(t.Context(), acme)
	if err != nil || resp.GetAllowed() || len(resp.GetPermit()) != 0 {
		t.Fatalf("third Acquire of 2 = %v, %v; want denied without a permit", resp, err)
	}
	if got := resp.GetRetryAfter().AsDuration(); got != 29*time.Second {
		t.Errorf("denial retry_after %v, want 29s (the first permit's expiry)", got)
	}
	release()
	fbRelease, fb, err := c.Acquire(t.Context(), map[string]string{"tenant": "acme", "fallback": "1"})
	if err != nil || !fb.GetAllowed() || fb.GetFallback() == nil {
		t.Fatalf("fallback Acquire = %v, %v", fb, err)
	}
	fbRelease()
	if got := srv.counts().releases; got != 0 {
		t.Errorf("%d Release RPCs for a denial and a fallback, want 0", got)
	}
	if got := len(clk.Timers()); got != 2 {
		t.Errorf("%d renewers, want the 2 admitted permits'", got)
	}
}

func TestClient_Acquire_afterCloseReleaseReportsClosed(t *testing.T) {
	c, srv, clk, pe := permitClient(t, 0)
	release, _, err := c.Acquire(t.Context(), map[string]string{"tenant": "acme"})
	if err != nil {
		t.Fatal(err)
	}
	waitTimers(t, clk, 1)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := len(clk.Timers()); got != 0 {
		t.Errorf("Close left %d renewer timers", got)
	}
	release()
	if errs := pe.all(); len(errs) != 1 || !errors.Is(errs[0], client.ErrClosed) {
		t.Errorf("OnPermitError told %v, want ErrClosed", errs)
	}
	if got := srv.counts().releases; got != 0 {
		t.Errorf("%d releases after Close", got)
	}
	if _, _, err := c.Acquire(t.Context(), map[string]string{"tenant": "acme"}); !errors.Is(err, client.ErrClosed) {
		t.Errorf("Acquire after Close: %v, want ErrClosed", err)
	}
}

func TestClient_Reserve_settleRoundTrip(t *testing.T) {
	c, srv, _, _ := permitClient(t, forever)
	acme := map[string]string{"tenant": "acme"}
	for _, tc := range []struct {
		max, actual int64
		want        client.Settlement
		budget      int64 // the fake's budget after settling
	}{
		{max: 10, actual: 3, want: client.Settlement{Settled: true, Refunded: 7}, budget: 97},
		{max: 10, actual: 12, want: client.Settlement{Settled: true, Extra: 2}, budget: 85},
		{max: 5, actual: 5, want: client.Settlement{Settled: true}, budget: 80},
	} {
		settle, resp, err := c.Reserve(t.Context(), acme, tc.max)
		if err != nil || !resp.GetAllowed() || len(resp.GetReservation()) == 0 {
			t.Fatalf("Reserve(%d) = %v, %v", tc.max, resp, err)
		}
		got, err := settle(t.Context(), tc.actual)
		if err != nil || got != tc.want {
			t.Errorf("settle(%d) of %d = %+v, %v; want %+v", tc.actual, tc.max, got, err, tc.want)
		}
		if again, err := settle(t.Context(), tc.actual); err != nil || again.Settled {
			t.Errorf("second settle = %+v, %v; want not settled", again, err)
		}
		srv.mu.Lock()
		budget := srv.budget
		srv.mu.Unlock()
		if budget != tc.budget {
			t.Errorf("after settle(%d) of %d the budget is %d, want %d", tc.actual, tc.max, budget, tc.budget)
		}
	}
	if _, err := c.Settle(t.Context(), []byte("x"), -1); !errors.Is(err, client.ErrNegativeCost) {
		t.Errorf("Settle(-1) = %v, want ErrNegativeCost", err)
	}
	settle, resp, err := c.Reserve(t.Context(), acme, 1000) // beyond the budget
	if err != nil || resp.GetAllowed() {
		t.Fatalf("Reserve(1000) = %v, %v; want denied", resp, err)
	}
	if got, err := settle(t.Context(), 1); err != nil || got.Settled {
		t.Errorf("settle of a denial = %+v, %v", got, err)
	}
	if got := srv.counts().settles; got != 6 {
		t.Errorf("%d Settle RPCs, want 6 (none for the bad actual or the denial)", got)
	}
	if _, _, err := c.Reserve(t.Context(), acme, -1); !errors.Is(err, client.ErrNegativeCost) {
		t.Errorf("Reserve(-1) = %v, want ErrNegativeCost", err)
	}
}

func TestClient_ops_plainCalls(t *testing.T) {
	c, srv, _, _ := permitClient(t, 0)
	_, resp, err := c.Acquire(t.Context(), map[string]string{"tenant": "acme"})
	if err != nil {
		t.Fatal(err)
	}
	tok := resp.GetPermit()
	if in, ok, err := c.Renew(t.Context(), tok, 5*time.Second); err != nil || !ok || in != 5*time.Second {
		t.Errorf("Renew(5s) = %v, %v, %v", in, ok, err)
	}
	if _, _, err := c.Renew(t.Context(), tok, -time.Second); !errors.Is(err, client.ErrNegativeTTL) {
		t.Errorf("Renew(-1s) = %v, want ErrNegativeTTL", err)
	}
	if ok, err := c.Release(t.Context(), tok); err != nil || !ok {
		t.Errorf("Release = %v, %v", ok, err)
	}
	if ok, err := c.Release(t.Context(), tok); err != nil || ok {
		t.Errorf("second Release = %v, %v; want false, nil", ok, err)
	}
	if in, ok, err := c.Renew(t.Context(), tok, 0); err != nil || ok || in != 0 {
		t.Errorf("Renew of a released permit = %v, %v, %v", in, ok, err)
	}
	if _, err := c.Release(t.Context(), []byte("junk")); status.Code(err) != codes.InvalidArgument {
		t.Errorf("Release(junk) = %v, want INVALID_ARGUMENT", err)
	}
	if got := srv.counts(); got.renews != 2 || got.releases != 2 {
		t.Errorf("counts %+v, want 2 renews and 2 releases reaching the server", got)
	}
}

func TestClient_Acquire_renewErrors(t *testing.T) {
	c, srv, clk, pe := permitClient(t, 0)
	release, _, err := c.Acquire(t.Context(), map[string]string{"tenant": "acme"})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	srv.mu.Lock()
	srv.failNext = 1
	srv.mu.Unlock()
	// An unanswered renewal is reported and tried again a third of the
	// ttl later; the permit, renewed then, is still held past its ttl.
	for i := 1; i <= 3; i++ {
		waitTimers(t, clk, 1)
		clk.Advance(10 * time.Second)
		waitFor(t, 10*time.Second, "renewal", func() bool { return srv.counts().renews == i })
	}
	waitTimers(t, clk, 1)
	if errs := pe.all(); len(errs) != 1 || status.Code(errors.Unwrap(errs[0])) != codes.Unavailable {
		t.Fatalf("OnPermitError told %v, want one UNAVAILABLE", errs)
	}
	if got := srv.counts().live; got != 1 {
		t.Fatalf("%d live permits at %v, want 1", got, clk.Now())
	}
	// A permit the owner refuses as malformed is not renewed again.
	junkRelease, _, err := c.Acquire(t.Context(), map[string]string{"tenant": "acme", "junk": "1"})
	if err != nil {
		t.Fatal(err)
	}
	defer junkRelease()
	waitTimers(t, clk, 2)
	clk.Advance(10 * time.Second)
	waitFor(t, 10*time.Second, "both renewals", func() bool { return srv.counts().renews == 5 })
	waitFor(t, 10*time.Second, "the junk renewer to stop", func() bool { return len(clk.Timers()) == 1 && len(pe.all()) == 2 })
	if errs := pe.all(); status.Code(errs[1]) != codes.InvalidArgument {
		t.Errorf("OnPermitError told %v, want INVALID_ARGUMENT second", errs)
	}
}

func TestClient_Acquire_errorGivesANoopRelease(t *testing.T) {
	c, srv, clk, pe := permitClient(t, 0)
	release, resp, err := c.Acquire(t.Context(), map[string]string{}) // the fake refuses: no tenant
	if status.Code(err) != codes.InvalidArgument || resp != nil || release == nil {
		t.Fatalf("Acquire = %v, %v, %v; want INVALID_ARGUMENT, no response, a release", release != nil, resp, err)
	}
	release()
	if got := srv.counts().releases; got != 0 || len(clk.Timers()) != 0 || len(pe.all()) != 0 {
		t.Errorf("after a failed Acquire: %d releases, timers %v, errors %v", got, clk.Timers(), pe.all())
	}
}
