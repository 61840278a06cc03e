package peer

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/grpclimit/grpclimittest"
	"github.com/weirhq/weir/memstore"
)

// fakeHandler answers every item with a result derived from it (Overall.TAT
// = Now, one Result per limit with TAT = Now + Interval*Cost), unless answer
// is set. With gate set, every call first waits for gate to close, even past
// its context, like a hung owner.
type fakeHandler struct {
	gate    chan struct{}
	answer  func(decide.Request) Result
	entered chan struct{} // optional; receives once per call, non-blocking

	mu      sync.Mutex
	from    []string
	batches [][]decide.Request
}

func (h *fakeHandler) HandleDecide(_ context.Context, from string, items []decide.Request) []Result {
	h.mu.Lock()
	h.from = append(h.from, from)
	h.batches = append(h.batches, items)
	h.mu.Unlock()
	if h.entered != nil {
		select {
		case h.entered <- struct{}{}:
		default:
		}
	}
	if h.gate != nil {
		<-h.gate
	}
	out := make([]Result, len(items))
	for i, it := range items {
		if h.answer != nil {
			out[i] = h.answer(it)
		} else {
			out[i] = echo(it)
		}
	}
	return out
}

func (h *fakeHandler) batchSizes() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	sizes := make([]int, len(h.batches))
	for i, b := range h.batches {
		sizes[i] = len(b)
	}
	return sizes
}

// newGate returns a gate for fakeHandler and its idempotent release, also
// run when the test ends so that no handler outlives it.
func newGate(t testing.TB) (chan struct{}, func()) {
	gate := make(chan struct{})
	release := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(release)
	return gate, release
}

func echo(it decide.Request) Result {
	rs := make([]gcra.Result, len(it.Limits))
	for i, l := range it.Limits {
		rs[i] = gcra.Result{Allowed: true, TAT: it.Now + l.Interval*it.Cost, Remaining: l.Burst - it.Cost}
	}
	return Result{Overall: gcra.Result{Allowed: true, TAT: it.Now, Remaining: it.Cost}, Results: rs}
}

func item(now int64) decide.Request {
	return decide.Request{
		Group:  "acme",
		Keys:   []string{"weir:{acme}:a", "weir:{acme}:b"},
		Limits: []gcra.Limit{{Interval: 1000, Burst: 10}, {Interval: 50, Burst: 3}},
		Cost:   2,
		Now:    now,
	}
}

// startServer serves h on a free loopback port until the test ends.
func startServer(t testing.TB, h Handler) string {
	t.Helper()
	return grpclimittest.Serve(t, nil, func(s *grpc.Server) { Register(s, h) })
}

// newClient returns a Client closed when the test ends, and its registry.
func newClient(t testing.TB, mutate func(*ClientConfig)) (*Client, *prometheus.Registry) {
	t.Helper()
	cfg := DefaultClientConfig()
	cfg.LocalName = "n1"
	cfg.Timeout = 5 * time.Second // tests that time out set their own
	if mutate != nil {
		mutate(&cfg)
	}
	reg := prometheus.NewRegistry()
	c, err := NewClient(cfg, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, reg
}

// waitFor spins until cond holds, failing the test after a generous bound.
// It yields instead of sleeping.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
	}
}

// queued reports how many calls wait in c's queue for addr.
func queued(c *Client, addr string) int {
	c.mu.Lock()
	p := c.mu.peers[addr]
	c.mu.Unlock()
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.mu.queue)
}

// memHandler decides items in a memstore, as an owner does.
type memHandler struct{ s *memstore.Store }

func (h memHandler) HandleDecide(ctx context.Context, _ string, items []decide.Request) []Result {
	out := make([]Result, len(items))
	for i, it := range items {
		rs := make([]gcra.Result, len(it.Keys))
		agg, err := h.s.Decide(ctx, it.Group, it.Keys, it.Limits, it.Cost, it.Now, rs)
		out[i] = Result{Overall: agg, Results: rs, Err: err}
	}
	return out
}
