package client_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/client"
	"github.com/weirhq/weir/grpclimit/grpclimittest"
	"github.com/weirhq/weir/server/servertest"
)

// forever is a batch window that never elapses within a test: batches then
// flush only when full, which makes their sizes deterministic.
const forever = time.Hour

func newClient(t *testing.T, addr string, window time.Duration, maxBatch int) *client.Client {
	t.Helper()
	cfg := client.DefaultConfig()
	cfg.Target = addr
	cfg.BatchWindow = window
	cfg.MaxBatch = maxBatch
	cfg.Timeout = 10 * time.Second // tests end calls themselves
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func desc(id string) map[string]string {
	return map[string]string{"tenant": "acme", "id": id}
}

// decideAll runs one Decide per id concurrently and returns the results by
// index.
func decideAll(ctx context.Context, c *client.Client, ids []string) ([]*weirv1.DecideResponse, []error) {
	resps := make([]*weirv1.DecideResponse, len(ids))
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			d := desc(id)
			if strings.HasPrefix(id, "bad") {
				d["bad"] = "1"
			}
			resps[i], errs[i] = c.Decide(ctx, d, int64(i+1))
		})
	}
	wg.Wait()
	return resps, errs
}

func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("req-%d", i)
	}
	return out
}

func TestClient_Decide_unbatched(t *testing.T) {
	fs := newFakeServer()
	c := newClient(t, servertest.Serve(t, fs), 0, 0)
	resp, err := c.Decide(t.Context(), map[string]string{"id": "a", "deny": "1"}, 7)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetAllowed() || resp.GetRemaining() != 7 || resp.GetPolicyVersion() != "a" {
		t.Errorf("response = %v", resp)
	}
	if decides, batches := fs.counts(); decides != 1 || len(batches) != 0 {
		t.Errorf("server saw %d Decide and batches %v, want 1 and none", decides, batches)
	}
}

func TestClient_Decide_coalescesFullBatches(t *testing.T) {
	fs := newFakeServer()
	c := newClient(t, servertest.Serve(t, fs), forever, 5)
	want := ids(20)
	resps, errs := decideAll(t.Context(), c, want)
	for i := range want {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if got := resps[i].GetPolicyVersion(); got != want[i] || resps[i].GetRemaining() != int64(i+1) {
			t.Errorf("call %d got the response for %q (remaining %d)", i, got, resps[i].GetRemaining())
		}
	}
	decides, batches := fs.counts()
	if decides != 0 || fmt.Sprint(batches) != "[5 5 5 5]" {
		t.Errorf("server saw %d Decide and batches %v, want 0 and [5 5 5 5]", decides, batches)
	}
}

func TestClient_Decide_flushesAfterWindow(t *testing.T) {
	fs := newFakeServer()
	c := newClient(t, servertest.Serve(t, fs), time.Millisecond, 100)
	resp, err := c.Decide(t.Context(), desc("only"), 1)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetPolicyVersion() != "only" {
		t.Errorf("got response for %q", resp.GetPolicyVersion())
	}
	if _, batches := fs.counts(); fmt.Sprint(batches) != "[1]" {
		t.Errorf("batches = %v, want [1]", batches)
	}
}

func TestClient_Decide_manyConcurrentCallers(t *testing.T) {
	fs := newFakeServer()
	c := newClient(t, servertest.Serve(t, fs), 100*time.Microsecond, 16)
	const callers, each = 50, 20
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("%d/%d", g, i)
				resp, err := c.Decide(t.Context(), desc(id), 1)
				if err != nil || resp.GetPolicyVersion() != id {
					t.Errorf("%s: got %q, %v", id, resp.GetPolicyVersion(), err)
				}
			}
		})
	}
	wg.Wait()
	_, batches := fs.counts()
	total := 0
	for _, n := range batches {
		if n < 1 || n > 16 {
			t.Errorf("batch of %d outside [1, 16]", n)
		}
		total += n
	}
	if total != callers*each {
		t.Errorf("server decided %d requests, want %d", total, callers*each)
	}
}

func TestClient_Decide_ctxCancelStopsWaiting(t *testing.T) {
	fs := newFakeServer()
	c := newClient(t, servertest.Serve(t, fs), forever, 100)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Decide(ctx, desc("gone"), 1)
		errc <- err
	}()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestClient_Decide_timeoutInsideCtx(t *testing.T) {
	fs := newFakeServer()
	fs.block = make(chan struct{})
	for _, window := range []time.Duration{0, forever} {
		cfg := client.DefaultConfig()
		cfg.Target = servertest.Serve(t, fs)
		cfg.BatchWindow = window
		cfg.Timeout = 20 * time.Millisecond
		c, err := client.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Decide(t.Context(), desc("slow"), 1)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("window %v: err = %v, want context.DeadlineExceeded", window, err)
		}
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}
}

func TestClient_Decide_abandonedCallIsNotSent(t *testing.T) {
	fs := newFakeServer()
	c := newClient(t, servertest.Serve(t, fs), time.Millisecond, 2)
	// The abandoned call may or may not reach the batch (select picks at
	// random); either way the server must never see it.
	for range 20 {
		gone, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := c.Decide(gone, desc("gone"), 1); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		resp, err := c.Decide(t.Context(), desc("kept"), 1)
		if err != nil || resp.GetPolicyVersion() != "kept" {
			t.Fatalf("got %q, %v", resp.GetPolicyVersion(), err)
		}
	}
	_, batches := fs.counts()
	if len(batches) != 20 {
		t.Errorf("batches = %v, want twenty of size 1", batches)
	}
	for _, n := range batches {
		if n != 1 {
			t.Errorf("batches = %v, want twenty of size 1", batches)
			break
		}
	}
}

func TestClient_Decide_badRequestDoesNotFailOthers(t *testing.T) {
	fs := newFakeServer()
	c := newClient(t, servertest.Serve(t, fs), forever, 3)
	resps, errs := decideAll(t.Context(), c, []string{"a", "bad", "c"})
	for i, id := range []string{"a", "", "c"} {
		if id == "" {
			if status.Code(errs[i]) != codes.InvalidArgument {
				t.Errorf("bad call: err = %v, want InvalidArgument", errs[i])
			}
			continue
		}
		if errs[i] != nil || resps[i].GetPolicyVersion() != id {
			t.Errorf("call %q: got %q, %v", id, resps[i].GetPolicyVersion(), errs[i])
		}
	}
	if decides, batches := fs.counts(); decides != 3 || fmt.Sprint(batches) != "[3]" {
		t.Errorf("server saw %d Decide and batches %v, want 3 and [3]", decides, batches)
	}
}

func TestClient_Decide_negativeCost(t *testing.T) {
	fs := newFakeServer()
	c := newClient(t, servertest.Serve(t, fs), forever, 2)
	if _, err := c.Decide(t.Context(), desc("neg"), -1); !errors.Is(err, client.ErrNegativeCost) {
		t.Errorf("err = %v, want ErrNegativeCost", err)
	}
}

func TestClient_Close_failsPendingCalls(t *testing.T) {
	fs := newFakeServer()
	addr := servertest.Serve(t, fs)
	// Queued calls: the window never ends and the batch never fills.
	queued := newClient(t, addr, forever, 100)
	// Sent calls: the batch is full and the server holds it.
	fs.block = make(chan struct{})
	sent := newClient(t, addr, forever, 3)

	results := make(chan error, 6)
	for _, c := range []*client.Client{queued, sent} {
		for i := range 3 {
			go func() {
				_, err := c.Decide(t.Context(), desc(fmt.Sprint(i)), 1)
				results <- err
			}()
		}
	}
	<-fs.entered // the full batch reached the server
	for _, c := range []*client.Client{queued, sent} {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for range 6 {
		if err := <-results; !errors.Is(err, client.ErrClosed) {
			t.Errorf("err = %v, want ErrClosed", err)
		}
	}
	if err := sent.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	if _, err := sent.Decide(t.Context(), desc("late"), 1); !errors.Is(err, client.ErrClosed) {
		t.Errorf("Decide after Close: err = %v, want ErrClosed", err)
	}
	if _, err := sent.DecideBatch(t.Context(), []*weirv1.DecideRequest{{}}); !errors.Is(err, client.ErrClosed) {
		t.Errorf("DecideBatch after Close: err = %v, want ErrClosed", err)
	}
}

func TestClient_Close_unbatchedInFlight(t *testing.T) {
	fs := newFakeServer()
	fs.block = make(chan struct{})
	c := newClient(t, servertest.Serve(t, fs), 0, 0)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Decide(t.Context(), desc("x"), 1)
		errc <- err
	}()
	<-fs.entered
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, client.ErrClosed) {
		t.Errorf("err = %v, want ErrClosed", err)
	}
}

func TestClient_DecideBatch(t *testing.T) {
	fs := newFakeServer()
	c := newClient(t, servertest.Serve(t, fs), forever, 2) // explicit batches bypass the batcher
	reqs := []*weirv1.DecideRequest{
		{Descriptors: desc("x"), Cost: new(int64(1))},
		{Descriptors: desc("y"), Cost: new(int64(2))},
		{Descriptors: desc("z"), Cost: new(int64(3))},
	}
	resps, err := c.DecideBatch(t.Context(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"x", "y", "z"} {
		if resps[i].GetPolicyVersion() != want {
			t.Errorf("response %d is for %q, want %q", i, resps[i].GetPolicyVersion(), want)
		}
	}
	if resps, err := c.DecideBatch(t.Context(), nil); resps != nil || err != nil {
		t.Errorf("empty batch = %v, %v; want nil, nil", resps, err)
	}
	if _, batches := fs.counts(); fmt.Sprint(batches) != "[3]" {
		t.Errorf("batches = %v, want [3]", batches)
	}
}

func TestConfig_Validate(t *testing.T) {
	ok := client.DefaultConfig()
	ok.Target = "127.0.0.1:8081"
	tests := []struct {
		name   string
		change func(*client.Config)
		want   string // substring of the error; "" for valid
	}{
		{"default with target", func(*client.Config) {}, ""},
		{"zero fields mean defaults", func(c *client.Config) { *c = client.Config{Target: "x"} }, ""},
		{"empty target", func(c *client.Config) { c.Target = "" }, "empty target"},
		{"negative window", func(c *client.Config) { c.BatchWindow = -1 }, "negative batch window"},
		{"negative max batch", func(c *client.Config) { c.MaxBatch = -1 }, "negative max batch"},
		{"max batch over server limit", func(c *client.Config) { c.MaxBatch = client.ServerMaxBatch + 1 }, "exceeds the server limit"},
		{"negative timeout", func(c *client.Config) { c.Timeout = -time.Second }, "negative timeout"},
		{"negative route refresh", func(c *client.Config) { c.RouteRefresh = -1 }, "negative route refresh"},
		{"negative max route conns", func(c *client.Config) { c.MaxRouteConns = -1 }, "negative max route conns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			tt.change(&cfg)
			err := cfg.Validate()
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Validate() = %v, want error containing %q", err, tt.want)
			}
			c, nerr := client.New(cfg)
			if (nerr == nil) != (err == nil) {
				t.Errorf("New and Validate disagree: %v vs %v", nerr, err)
			}
			if c != nil {
				_ = c.Close()
			}
		})
	}
}

// TestClient_Decide_sendsNoBDPPings makes 300 calls one by one through a
// relay that parses what the Client sends: a Client with gRPC's dynamic
// windows would PING after nearly every answer (and the node would read it
// and write its ACK); with static windows it sends none.
func TestClient_Decide_sendsNoBDPPings(t *testing.T) {
	var frames grpclimittest.Frames
	c := newClient(t, grpclimittest.CountingRelay(t, servertest.Serve(t, newFakeServer()), &frames), 0, 0)
	for i := range 300 {
		if _, err := c.Decide(t.Context(), map[string]string{"id": strconv.Itoa(i)}, 1); err != nil {
			t.Fatal(err)
		}
	}
	if frames.Data.Load() == 0 {
		t.Fatal("the relay parsed no DATA frame: it is not seeing the Client's calls")
	}
	if n := frames.Pings.Load(); n != 0 {
		t.Errorf("the Client sent %d PINGs with %d DATA frames over 300 calls, want none", n, frames.Data.Load())
	}
}
