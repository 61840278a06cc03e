package limiter

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/policy"
)

// barrierStore answers no call until n calls wait in it at once (or ctx
// ends): a batch decided one request after another never gets an answer.
// Group "broken" fails with an error that names no dependency.
type barrierStore struct {
	n       int
	mu      sync.Mutex
	waiting int
	open    chan struct{}
}

func newBarrierStore(n int) *barrierStore { return &barrierStore{n: n, open: make(chan struct{})} }

func (s *barrierStore) Decide(ctx context.Context, r *decide.Request, out []gcra.Result) (gcra.Result, error) {
	s.mu.Lock()
	if s.waiting++; s.waiting == s.n {
		close(s.open)
	}
	s.mu.Unlock()
	select {
	case <-s.open:
	case <-ctx.Done():
		return gcra.Result{}, ctx.Err()
	}
	if r.Group == "broken" {
		return gcra.Result{}, errors.New("store: answered 1 result for 2 limits")
	}
	for i := range out {
		out[i] = gcra.Result{Allowed: true, Remaining: 7}
	}
	return gcra.Result{Allowed: true, Remaining: 7}, nil
}

func newBarrierLimiter(t *testing.T, store Store) *Limiter {
	t.Helper()
	p, err := policy.Parse("test.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	lim, err := New(DefaultConfig(), policy.Static(p), store, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

func TestLimiter_DecideBatch_waitingRequestsConcurrently(t *testing.T) {
	const n = 50
	lim := newBarrierLimiter(t, newBarrierStore(n))
	rs := make([]Request, n)
	for i := range rs {
		rs[i] = Request{Descriptors: desc("tenant", fmt.Sprint("t", i)), Cost: 1}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ds, err := lim.DecideBatch(ctx, rs)
	if err != nil {
		t.Fatalf("batch decided serially? %v", err)
	}
	for i, d := range ds {
		if !d.Allowed || d.Remaining != 7 || d.Fallback != nil {
			t.Fatalf("decision %d: %+v", i, d)
		}
	}
}

func TestLimiter_DecideBatch_failingItemFallsBackAlone(t *testing.T) {
	lim := newBarrierLimiter(t, newBarrierStore(3))
	rs := []Request{
		{Descriptors: desc("tenant", "a"), Cost: 1},
		{Descriptors: desc("tenant", "broken"), Cost: 1},
		{Descriptors: desc("tenant", "b"), Cost: 1},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ds, err := lim.DecideBatch(ctx, rs)
	if err != nil {
		t.Fatalf("one broken item failed the batch: %v", err)
	}
	if f := ds[1].Fallback; f == nil || f.Reason != ReasonStoreFailed {
		t.Fatalf("broken item: %+v", ds[1])
	}
	for _, i := range []int{0, 2} {
		if ds[i].Fallback != nil || ds[i].Remaining != 7 {
			t.Fatalf("item %d was affected: %+v", i, ds[i])
		}
	}
}

func TestLimiter_DecideBatch_cancelledContextFailsBatch(t *testing.T) {
	lim := newBarrierLimiter(t, newBarrierStore(3)) // never opens: 2 requests
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := lim.DecideBatch(ctx, []Request{{Descriptors: desc("tenant", "a"), Cost: 1}, {Descriptors: desc("tenant", "b"), Cost: 1}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the deadline", err)
	}
}

func TestConfig_Validate_batchConcurrency(t *testing.T) {
	c := DefaultConfig()
	c.BatchConcurrency = 0
	if c.Validate() == nil {
		t.Fatal("zero batch concurrency accepted")
	}
}

// A batch resolves all its requests into one slice: each request's group
// check sees only its own matches, and each decision's limits are its own.
func TestLimiter_DecideBatch_requestsOfDifferentGroups(t *testing.T) {
	rs := []Request{
		{Descriptors: desc("tenant", "a", "user", "u"), Cost: 1},
		{Descriptors: desc("tenant", "b", "user", "u", "route", "r"), Cost: 1},
		{Descriptors: desc("ip", "10.0.0.1"), Cost: 1},
	}
	batch, single := newFixture(t, testPolicy), newFixture(t, testPolicy)
	got, err := batch.lim.DecideBatch(context.Background(), rs)
	if err != nil {
		t.Fatalf("a batch of requests in groups a, b and 10.0.0.1: %v", err)
	}
	for i, r := range rs {
		want, err := single.lim.Decide(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got[i]) != fmt.Sprint(want) {
			t.Errorf("requests[%d] in a batch: %+v, alone: %+v", i, got[i], want)
		}
	}
	first := got[1].Limits[0]
	got[0].Limits = append(got[0].Limits, LimitDecision{Name: "appended"})
	if got[1].Limits[0] != first {
		t.Errorf("appending to requests[0]'s limits overwrote requests[1]'s: %+v", got[1].Limits[0])
	}

	// One request whose own limits span two groups is refused, by index.
	mixed := append(rs, Request{Descriptors: desc("tenant", "a", "ip", "10.0.0.2"), Cost: 1})
	if _, err := batch.lim.DecideBatch(context.Background(), mixed); !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), "requests[3]") {
		t.Errorf("mixed groups in requests[3]: err = %v, want an invalid request naming requests[3]", err)
	}
}

// TestLimiter_DecideBatch_reusedScratch: batches that reuse one another's
// scratch (larger, smaller, failed ones between) decide exactly as the
// same requests decided one by one on a twin limiter.
func TestLimiter_DecideBatch_reusedScratch(t *testing.T) {
	batch, single := newFixture(t, testPolicy), newFixture(t, testPolicy)
	three := func(i int) Request { // three matches: per-user, per-tenant, the shadow
		return Request{Descriptors: desc("tenant", fmt.Sprint("t", i%3), "user", fmt.Sprint("u", i%2), "route", "/r"), Cost: 1}
	}
	one := func(i int) Request { return Request{Descriptors: desc("ip", fmt.Sprint("10.0.0.", i%4)), Cost: 2} }
	bad := Request{Descriptors: desc("tenant", "t0", "bogus", "x"), Cost: 1}
	var rounds [][]Request
	for n := range 4 {
		var big []Request
		for i := range 40 {
			big = append(big, three(i+n))
		}
		small := []Request{one(n)}
		mixed := []Request{one(n), three(n), {Descriptors: desc("route", "/unmatched"), Cost: 1}, three(n + 1), one(n + 1)}
		failing := append(slices.Clone(mixed), bad)
		rounds = append(rounds, big, small, failing, mixed)
	}
	for r, rs := range rounds {
		got, err := batch.lim.DecideBatch(context.Background(), rs)
		if slices.ContainsFunc(rs, func(q Request) bool { return q.Descriptors["bogus"] != "" }) {
			if !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("round %d: err = %v, want ErrInvalidRequest", r, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("round %d: %v", r, err)
		}
		for i, q := range rs {
			want, err := single.lim.Decide(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got[i], want) {
				t.Fatalf("round %d, request %d: batch decided %+v, one by one %+v", r, i, got[i], want)
			}
		}
		batch.clock.Add(100 * time.Millisecond)
		single.clock.Add(100 * time.Millisecond)
	}
}
