package peer

import (
	"context"
	"errors"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/metrictest"
)

func TestClient_Decide_roundTrip(t *testing.T) {
	h := &fakeHandler{}
	addr := startServer(t, h)
	c, reg := newClient(t, nil)

	it := item(1_000_000)
	it.Strict = true
	got, err := c.Decide(t.Context(), addr, it)
	if err != nil {
		t.Fatal(err)
	}
	if want := echo(it); !reflect.DeepEqual(got, want) {
		t.Fatalf("result = %+v, want %+v", got, want)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.batches) != 1 || !reflect.DeepEqual(h.batches[0], []decide.Request{it}) {
		t.Fatalf("handler saw %+v, want [%+v]", h.batches, it)
	}
	if h.from[0] != "n1" {
		t.Fatalf("from = %q, want n1", h.from[0])
	}
	if v := metrictest.Value(t, reg, "weir_forwards_total", "result", outcomeOK); v != 1 {
		t.Fatalf("weir_forwards_total{result=ok} = %v, want 1", v)
	}
}

func TestClient_Decide_coalescesWhileBusy(t *testing.T) {
	gate, release := newGate(t)
	h := &fakeHandler{gate: gate, entered: make(chan struct{}, 100)}
	addr := startServer(t, h)
	c, _ := newClient(t, func(cfg *ClientConfig) { cfg.MaxInFlight = 1 })

	const n = 50
	results := make([]Result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := func(i int) {
		wg.Go(func() { results[i], errs[i] = c.Decide(t.Context(), addr, item(int64(i+1))) })
	}
	start(0)
	<-h.entered // the first RPC is in flight and blocked
	for i := 1; i < n; i++ {
		start(i)
	}
	waitFor(t, "49 queued calls", func() bool { return queued(c, addr) == n-1 })
	release()
	wg.Wait()

	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if want := echo(item(int64(i + 1))); !reflect.DeepEqual(results[i], want) {
			t.Fatalf("caller %d got %+v, want its own %+v", i, results[i], want)
		}
	}
	if sizes := h.batchSizes(); !reflect.DeepEqual(sizes, []int{1, n - 1}) {
		t.Fatalf("batch sizes = %v, want [1 %d]", sizes, n-1)
	}
}

func TestClient_Decide_splitsAtMaxBatch(t *testing.T) {
	gate, release := newGate(t)
	h := &fakeHandler{gate: gate, entered: make(chan struct{}, 100)}
	addr := startServer(t, h)
	c, _ := newClient(t, func(cfg *ClientConfig) { cfg.MaxInFlight = 1; cfg.MaxBatch = 4 })

	var wg sync.WaitGroup
	wg.Go(func() { _, _ = c.Decide(t.Context(), addr, item(1)) })
	<-h.entered
	for i := range 10 {
		wg.Go(func() { _, _ = c.Decide(t.Context(), addr, item(int64(i+2))) })
	}
	waitFor(t, "10 queued calls", func() bool { return queued(c, addr) == 10 })
	release()
	wg.Wait()
	if sizes := h.batchSizes(); !reflect.DeepEqual(sizes, []int{1, 4, 4, 2}) {
		t.Fatalf("batch sizes = %v, want [1 4 4 2]", sizes)
	}
}

func TestClient_Decide_windowFillsBatch(t *testing.T) {
	h := &fakeHandler{}
	addr := startServer(t, h)
	// A window far longer than the test: only a full batch can leave.
	c, _ := newClient(t, func(cfg *ClientConfig) { cfg.Window = time.Hour; cfg.MaxBatch = 4 })
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			if _, err := c.Decide(t.Context(), addr, item(int64(i))); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if sizes := h.batchSizes(); !reflect.DeepEqual(sizes, []int{4}) {
		t.Fatalf("batch sizes = %v, want [4]", sizes)
	}
}

func TestClient_Decide_windowSendsPartialBatch(t *testing.T) {
	h := &fakeHandler{}
	addr := startServer(t, h)
	c, _ := newClient(t, func(cfg *ClientConfig) { cfg.Window = time.Millisecond })
	if _, err := c.Decide(t.Context(), addr, item(1)); err != nil {
		t.Fatal(err)
	}
	if sizes := h.batchSizes(); !reflect.DeepEqual(sizes, []int{1}) {
		t.Fatalf("batch sizes = %v, want [1]", sizes)
	}
}

func TestClient_Decide_notOwnerAndErr(t *testing.T) {
	h := &fakeHandler{answer: func(it decide.Request) Result {
		switch it.Group {
		case "elsewhere":
			return Result{NotOwner: "n3"}
		case "broken":
			return Result{Err: errors.New("redis: connection refused"), Reason: "state_load_failed"}
		case "blank":
			return Result{Err: errors.New("")}
		}
		return echo(it)
	}}
	addr := startServer(t, h)
	c, reg := newClient(t, nil)

	it := item(5)
	it.Group = "elsewhere"
	r, err := c.Decide(t.Context(), addr, it)
	if err != nil || r.NotOwner != "n3" || r.Err != nil || r.Results != nil {
		t.Fatalf("not owner: got %+v, %v", r, err)
	}
	it.Group = "broken"
	r, err = c.Decide(t.Context(), addr, it)
	if err != nil || !errors.Is(r.Err, ErrRemote) || !strings.Contains(r.Err.Error(), "redis: connection refused") || r.Reason != "state_load_failed" {
		t.Fatalf("owner error: got %+v, %v", r, err)
	}
	it.Group = "blank"
	if r, err = c.Decide(t.Context(), addr, it); err != nil || !errors.Is(r.Err, ErrRemote) {
		t.Fatalf("empty owner error: got %+v, %v", r, err)
	}
	if v := metrictest.Value(t, reg, "weir_forwards_total", "result", outcomeNotOwner); v != 1 {
		t.Fatalf("not_owner count = %v, want 1", v)
	}
	if v := metrictest.Value(t, reg, "weir_forwards_total", "result", outcomeError); v != 2 {
		t.Fatalf("error count = %v, want 2", v)
	}
}

func TestClient_Decide_handlerWrongCount(t *testing.T) {
	addr := startServer(t, handlerFunc(func(context.Context, string, []decide.Request) []Result { return nil }))
	c, reg := newClient(t, nil)
	if _, err := c.Decide(t.Context(), addr, item(1)); err == nil || !strings.Contains(err.Error(), "handler returned 0 results") {
		t.Fatalf("err = %v, want the server's internal error", err)
	}
	if v := metrictest.Value(t, reg, "weir_forward_errors_total"); v != 1 {
		t.Fatalf("weir_forward_errors_total = %v, want 1", v)
	}
}

type handlerFunc func(context.Context, string, []decide.Request) []Result

func (f handlerFunc) HandleDecide(ctx context.Context, from string, items []decide.Request) []Result {
	return f(ctx, from, items)
}

// These tests check which wait ends a call, not how fast the machine runs:
// each call has one wait it must end on (the caller's deadline, or the
// client's Timeout) and one it must not (the other of the two, a handler
// that never answers, a handshake that never completes), and the second is
// set a minute away. The error says which ended it; returnedBefore checks
// that the call did not sit out the wait it must not end on. Scheduling
// delays on a loaded machine are orders of magnitude below that bound, so
// they cannot fail these tests. How promptly a call returns is a latency
// figure, measured in benchmarks and the chaos suite, not in timed tests.

// ruledOut is the wait a correct call never reaches.
const ruledOut = time.Minute

// returnedBefore fails if a call took d, at least half the ruled-out wait:
// it waited for what it must not.
func returnedBefore(t *testing.T, d time.Duration) {
	t.Helper()
	if d >= ruledOut/2 {
		t.Errorf("returned after %v: it waited for the %v it must not wait for", d, ruledOut)
	}
}

func TestClient_Decide_hungHandlerCallerDeadline(t *testing.T) {
	h := &fakeHandler{gate: hang(t)} // opens when the test ends
	addr := startServer(t, h)
	// The client's Timeout is far off: only the caller's deadline can end
	// these calls in time.
	c, _ := newClient(t, func(cfg *ClientConfig) { cfg.Timeout = ruledOut })

	const deadline = 50 * time.Millisecond
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), deadline)
			defer cancel()
			start := time.Now()
			_, err := c.Decide(ctx, addr, item(1))
			returnedBefore(t, time.Since(start))
			if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrTimeout) {
				t.Errorf("err = %v, want the caller's context.DeadlineExceeded", err)
			}
		})
	}
	wg.Wait()
}

// callerGuard is a caller's context whose deadline only a client that
// ignored its own Timeout would reach.
func callerGuard(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), ruledOut)
	t.Cleanup(cancel)
	return ctx
}

func TestClient_Decide_hungHandlerTimeout(t *testing.T) {
	addr := startServer(t, &fakeHandler{gate: hang(t)})
	const timeout = 30 * time.Millisecond
	c, reg := newClient(t, func(cfg *ClientConfig) { cfg.Timeout = timeout })
	start := time.Now()
	_, err := c.Decide(callerGuard(t), addr, item(1))
	returnedBefore(t, time.Since(start))
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrTimeout and context.DeadlineExceeded", err)
	}
	if v := metrictest.Value(t, reg, "weir_forwards_total", "result", outcomeTimeout); v != 1 {
		t.Fatalf("timeout count = %v, want 1", v)
	}
}

// A peer frozen with SIGSTOP accepts TCP connections (the kernel does) but
// never speaks: the HTTP/2 handshake never completes.
func TestClient_Decide_frozenPeer(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lis.Close() })
	const timeout = 40 * time.Millisecond
	c, _ := newClient(t, func(cfg *ClientConfig) { cfg.Timeout = timeout })
	for range 3 { // the second and third find the connection stuck too
		start := time.Now()
		_, err := c.Decide(callerGuard(t), lis.Addr().String(), item(1))
		returnedBefore(t, time.Since(start))
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("err = %v, want ErrTimeout", err)
		}
	}
}

// A refused connection fails the call with the transport's error at once:
// had the client waited for the peer to come back, its Timeout (a minute
// away) would have ended the call instead.
func TestClient_Decide_refusedFailsFast(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close() // nothing listens there any more
	c, _ := newClient(t, func(cfg *ClientConfig) { cfg.Timeout = ruledOut })
	start := time.Now()
	_, err = c.Decide(t.Context(), addr, item(1))
	if err == nil || errors.Is(err, ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a transport error", err)
	}
	returnedBefore(t, time.Since(start))
}

func TestClient_Decide_cancelledWhileQueuedIsNotSent(t *testing.T) {
	gate, release := newGate(t)
	h := &fakeHandler{gate: gate, entered: make(chan struct{}, 10)}
	addr := startServer(t, h)
	c, _ := newClient(t, func(cfg *ClientConfig) { cfg.MaxInFlight = 1 })

	var wg sync.WaitGroup
	wg.Go(func() { _, _ = c.Decide(t.Context(), addr, item(1)) })
	<-h.entered
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { _, err := c.Decide(ctx, addr, item(2)); errc <- err }()
	waitFor(t, "a queued call", func() bool { return queued(c, addr) == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	wg.Go(func() { _, _ = c.Decide(t.Context(), addr, item(3)) })
	waitFor(t, "the next call queued", func() bool { return queued(c, addr) == 2 })
	release()
	wg.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.batches) != 2 || len(h.batches[1]) != 1 || h.batches[1][0].Now != 3 {
		t.Fatalf("handler saw %+v, want the cancelled item left out", h.batches)
	}
}

func TestClient_Close_failsPending(t *testing.T) {
	h := &fakeHandler{gate: hang(t), entered: make(chan struct{}, 10)}
	addr := startServer(t, h)
	c, _ := newClient(t, func(cfg *ClientConfig) { cfg.MaxInFlight = 1 })

	errs := make(chan error, 5)
	for i := range 5 {
		go func() { _, err := c.Decide(t.Context(), addr, item(int64(i))); errs <- err }()
	}
	<-h.entered
	waitFor(t, "queued calls", func() bool { return queued(c, addr) == 4 })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if err := <-errs; !errors.Is(err, ErrClosed) {
			t.Fatalf("pending call: err = %v, want ErrClosed", err)
		}
	}
	if _, err := c.Decide(t.Context(), addr, item(9)); !errors.Is(err, ErrClosed) {
		t.Fatalf("after close: err = %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

func TestClient_Forget(t *testing.T) {
	gate, release := newGate(t)
	h := &fakeHandler{gate: gate, entered: make(chan struct{}, 10)}
	addr := startServer(t, h)
	c, _ := newClient(t, nil)

	errc := make(chan error, 1)
	go func() { _, err := c.Decide(t.Context(), addr, item(1)); errc <- err }()
	<-h.entered
	c.Forget(addr)
	if err := <-errc; !errors.Is(err, ErrForgotten) {
		t.Fatalf("pending call: err = %v, want ErrForgotten", err)
	}
	c.mu.Lock()
	n := len(c.mu.peers)
	c.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d peers after Forget, want 0", n)
	}
	release()
	if _, err := c.Decide(t.Context(), addr, item(2)); err != nil {
		t.Fatalf("after Forget a new connection should serve: %v", err)
	}
	c.Forget("127.0.0.1:1") // unknown: no-op
}

func TestClient_Decide_doneContext(t *testing.T) {
	c, _ := newClient(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := c.Decide(ctx, "127.0.0.1:1", item(1)); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestClientConfig_Validate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*ClientConfig)
		ok     bool
	}{
		{"default", func(*ClientConfig) {}, true},
		{"zero", func(c *ClientConfig) { *c = ClientConfig{} }, true},
		{"negative batch", func(c *ClientConfig) { c.MaxBatch = -1 }, false},
		{"batch over limit", func(c *ClientConfig) { c.MaxBatch = MaxItems + 1 }, false},
		{"negative window", func(c *ClientConfig) { c.Window = -time.Millisecond }, false},
		{"negative in flight", func(c *ClientConfig) { c.MaxInFlight = -1 }, false},
		{"negative timeout", func(c *ClientConfig) { c.Timeout = -1 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultClientConfig()
			tc.mutate(&cfg)
			before := cfg
			err := cfg.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
			if cfg != before {
				t.Fatal("Validate changed the config")
			}
			if _, err := NewClient(cfg, nil, nil); (err == nil) != tc.ok {
				t.Fatalf("NewClient err = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// hang returns a gate that opens only when the test ends.
func hang(t *testing.T) chan struct{} {
	gate, _ := newGate(t)
	return gate
}

// An answer that is waiting when the deadline is noticed (the process was
// descheduled while both arrived) is returned, not reported as a timeout.
func TestAwait_answerReadyWithDeadline(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 200 {
		done := make(chan answer, 1)
		done <- answer{result: Result{NotOwner: "n2"}}
		a, ok := await(ctx, done)
		if !ok || a.result.NotOwner != "n2" {
			t.Fatalf("try %d: await = %+v, %v; want the waiting answer", i, a, ok)
		}
	}
	if _, ok := await(ctx, make(chan answer, 1)); ok {
		t.Fatal("await reported an answer when none arrived")
	}
}
