package workload

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/chaos/history"
	"github.com/weirhq/weir/server/servertest"
)

// permitServer grants every Decide a permit named by a counter and
// records the Renew and Release calls it gets.
type permitServer struct {
	weirv1.UnimplementedRateLimiterServer
	mu       sync.Mutex
	next     byte
	renewed  map[byte]int
	released map[byte]int
}

func (s *permitServer) Decide(context.Context, *weirv1.DecideRequest) (*weirv1.DecideResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	return &weirv1.DecideResponse{Allowed: true, Matched: true, Permit: []byte{s.next},
		Limits: []*weirv1.LimitStatus{{Name: "conc", Key: "k", Allowed: true, Kind: "concurrency"}}}, nil
}

func (s *permitServer) Renew(_ context.Context, r *weirv1.RenewRequest) (*weirv1.RenewResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.renewed[r.GetPermit()[0]]++
	return &weirv1.RenewResponse{Renewed: true}, nil
}

func (s *permitServer) Release(_ context.Context, r *weirv1.ReleaseRequest) (*weirv1.ReleaseResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.released[r.GetPermit()[0]]++
	return &weirv1.ReleaseResponse{Released: true}, nil
}

func TestRun_holdReleasesRenewsAndCrashes(t *testing.T) {
	srv := &permitServer{renewed: map[byte]int{}, released: map[byte]int{}}
	cfg := Config{
		Targets: []Target{{Name: "n", Addr: servertest.Serve(t, srv)}},
		Classes: []Class{{Name: "conc", Weight: 1, Keys: 1, Cost: 1, Limits: []string{"conc"},
			Descriptors: map[string]string{"tenant": "t"},
			Hold:        &Hold{Min: 10 * time.Millisecond, Max: 30 * time.Millisecond, Crash: 0.3, Renew: 0.3}}},
		Rate: 100, Duration: time.Second, Deadline: time.Second, MaxInFlight: 1000, Seed: 3,
	}
	var buf bytes.Buffer
	w := history.NewWriter(&buf)
	w.Header(history.Header{Scenario: "t", Limits: []history.LimitSpec{{Name: "conc", Interval: time.Second, Burst: 5, MaxInFlight: 5, PermitTTL: time.Second}}})
	if _, err := Run(context.Background(), cfg, w); err != nil {
		t.Fatal(err)
	}
	h, err := history.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var crashed, renewed, released int
	for _, o := range h.Ops {
		p := o.Permit
		if p == nil || !p.Granted {
			t.Fatalf("op %d: no permit recorded: %+v", o.ID, o)
		}
		switch {
		case p.Crashed:
			crashed++
			if p.ReleaseInvoke != 0 || p.RenewInvoke != 0 {
				t.Fatalf("a crashed caller renewed or released: %+v", p)
			}
			continue
		case p.RenewInvoke != 0:
			renewed++
			if !p.Renewed || p.RenewInvoke < o.Complete || p.ReleaseInvoke < p.RenewComplete {
				t.Fatalf("renew out of order: %+v, complete %d", p, o.Complete)
			}
		}
		if !p.Released || p.ReleaseInvoke < o.Complete+int64(10*time.Millisecond) || p.ReleaseComplete < p.ReleaseInvoke {
			t.Fatalf("release out of order or too early: %+v, complete %d", p, o.Complete)
		}
		released++
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if crashed == 0 || renewed == 0 || released == 0 || len(srv.released) != released || len(srv.renewed) != renewed {
		t.Fatalf("crashed %d, renewed %d (server %d), released %d (server %d)", crashed, renewed, len(srv.renewed), released, len(srv.released))
	}
	for id, n := range srv.released {
		if n != 1 {
			t.Fatalf("permit %d released %d times", id, n)
		}
	}
}
