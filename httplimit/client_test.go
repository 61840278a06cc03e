package httplimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/client"
	"github.com/weirhq/weir/httplimit"
	"github.com/weirhq/weir/server/servertest"
	"github.com/weirhq/weir/ticket"
)

// oneSlot is a weir.v1 owner of one concurrency limit with one slot.
type oneSlot struct {
	weirv1.UnimplementedRateLimiterServer
	mu       sync.Mutex
	held     bool
	releases int
}

func (s *oneSlot) Decide(context.Context, *weirv1.DecideRequest) (*weirv1.DecideResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := &weirv1.LimitStatus{Name: "exports", Kind: "concurrency", Burst: 1, Window: durationpb.New(time.Minute)}
	resp := &weirv1.DecideResponse{Matched: true, Limits: []*weirv1.LimitStatus{l}}
	if s.held {
		l.InFlight, l.RetryAfter = 1, durationpb.New(time.Minute)
		resp.RetryAfter = l.RetryAfter
		return resp, nil
	}
	s.held = true
	tok, err := ticket.Encode(ticket.Ticket{Kind: ticket.Permit, Group: "acme", Keys: []string{"k"}, ID: [16]byte{7}})
	if err != nil {
		return nil, err
	}
	l.Allowed, l.InFlight = true, 1
	resp.Allowed, resp.Permit = true, tok
	return resp, nil
}

func (s *oneSlot) Release(context.Context, *weirv1.ReleaseRequest) (*weirv1.ReleaseResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releases++
	was := s.held
	s.held = false
	return &weirv1.ReleaseResponse{Released: was}, nil
}

// TestConcurrencyMiddleware_withClient runs the middleware over a real
// client and a fake owner: a handler that panics gives its slot back
// before the connection is dropped, and a request while the slot is held
// is answered 429.
func TestConcurrencyMiddleware_withClient(t *testing.T) {
	owner := &oneSlot{}
	cfg := client.DefaultConfig()
	cfg.Target, cfg.Timeout = servertest.Serve(t, owner), 10*time.Second
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	describe := func(*http.Request) (map[string]string, int64, bool) {
		return map[string]string{"tenant": "acme"}, 1, true
	}
	var inner *http.Response
	var srvURL string
	var hc *http.Client
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/nested" {
			res, err := hc.Get(srvURL + "/plain") // while this request holds the slot
			if err != nil {
				t.Error(err)
				return
			}
			res.Body.Close()
			inner = res
			return
		}
		panic(http.ErrAbortHandler) // net/http drops the connection quietly
	})
	srv := httptest.NewServer(httplimit.ConcurrencyMiddleware(c, describe, httplimit.WithTimeout(10*time.Second))(app))
	t.Cleanup(srv.Close)
	srvURL, hc = srv.URL, srv.Client()

	if _, err := hc.Get(srv.URL + "/panics"); err == nil {
		t.Fatal("a panicking handler answered")
	}
	owner.mu.Lock()
	held, releases := owner.held, owner.releases
	owner.mu.Unlock()
	if held || releases != 1 {
		t.Fatalf("after the panic the slot is held=%v after %d releases; want released once", held, releases)
	}
	res, err := hc.Get(srv.URL + "/nested")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || inner == nil || inner.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("outer %d, inner %v; want 200 around a 429", res.StatusCode, inner)
	}
	if got := inner.Header.Get(httplimit.RetryAfterField); got != "60" {
		t.Errorf("Retry-After %q, want 60", got)
	}
}
