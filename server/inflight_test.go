package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/grpclimit"
	"github.com/weirhq/weir/grpclimit/grpclimittest"
	"github.com/weirhq/weir/inflight"
)

// startGatedGRPC serves RegisterGRPC(d) as the node does: DefaultGRPCConfig
// and, unless budget is nil, every call gated by budget.
func startGatedGRPC(t *testing.T, d Decider, budget *inflight.Budget) string {
	t.Helper()
	cfg := DefaultGRPCConfig()
	return grpclimittest.Serve(t, cfg.ServerOptions(), func(s *grpc.Server) {
		if budget == nil {
			RegisterGRPC(s, d, nil)
		} else {
			RegisterGRPC(grpclimit.Gate(s, budget, cfg.MaxRecvMsgBytes), d, nil)
		}
	})
}

// heapPeak samples the bytes of heap objects every millisecond until the
// returned function is called, which answers the peak growth over the
// level at the start.
func heapPeak() func() int64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() int64 { metrics.Read(sample); return int64(sample[0].Value.Uint64()) }
	base := read()
	var peak atomic.Int64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			peak.Store(max(peak.Load(), read()-base))
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	return func() int64 { close(stop); <-done; return peak.Load() }
}

// The amplification run of issue 11: 200 concurrent 4 MB Decide calls over
// several connections. Each is refused (it is far over the largest valid
// request), but gRPC holds all of a message before any code of ours sees
// it, so without the node-wide budget the 200 messages are held at once
// (the heap grew by about 700 MB). With the budget the node holds a few of them at a time,
// and a small caller on its own connection keeps being answered within
// its deadline throughout.
func TestGRPC_inflightBudgetBoundsConcurrentHugeCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 800 MB")
	}
	// The default budget, with MaxWait as long as the small caller's
	// deadline: under the race detector on a shared 2-core machine the
	// sixteen huge calls being read share the bandwidth so thinly that the
	// first to finish (which makes room for the small call) took up to 5 s.
	cfg := inflight.DefaultConfig()
	cfg.MaxWait = 10 * time.Second
	budget, err := inflight.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := startGatedGRPC(t, &fakeDecider{}, budget)
	var huge []byte
	for i := 0; len(huge) < 4<<20-64; i++ {
		huge = append(huge, descriptor(fmt.Sprint(i), "v")...)
	}
	conns := []*grpc.ClientConn{grpclimittest.DialRaw(t, addr), grpclimittest.DialRaw(t, addr), grpclimittest.DialRaw(t, addr), grpclimittest.DialRaw(t, addr)}
	small := grpclimittest.DialRaw(t, addr)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	peak := heapPeak()
	var wg sync.WaitGroup
	var wrong atomic.Int64
	for i := range 200 {
		wg.Go(func() {
			var out weirv1.DecideResponse
			err := conns[i%len(conns)].Invoke(ctx, "/weir.v1.RateLimiter/Decide", &huge, &out)
			if status.Code(err) != codes.ResourceExhausted {
				wrong.Add(1)
			}
		})
	}
	attack := make(chan struct{})
	go func() { wg.Wait(); close(attack) }()
	normal := descriptor("user", "u1")
	answered, slowest := 0, time.Duration(0)
	for waiting := true; waiting; answered++ {
		select {
		case <-attack:
			waiting = false
		default:
		}
		var out weirv1.DecideResponse
		// Waiting calls are served round robin between connections, so
		// the small call waits behind at most one huge call of each of
		// the four flooding connections.
		start := time.Now()
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		err := small.Invoke(cctx, "/weir.v1.RateLimiter/Decide", &normal, &out)
		ccancel()
		slowest = max(slowest, time.Since(start))
		if err != nil || !out.GetAllowed() {
			t.Fatalf("small caller during the run (call %d): %v, %v", answered, &out, err)
		}
	}
	grew := peak()
	if n := wrong.Load(); n != 0 {
		t.Fatalf("%d huge calls were not refused RESOURCE_EXHAUSTED", n)
	}
	t.Logf("heap peak +%d MB; the small caller was answered %d times, the slowest in %v", grew>>20, answered, slowest)
	if grew > 300<<20 {
		t.Fatalf("heap grew by %d MB at its peak, want under 300 MB", grew>>20)
	}
}

// A call that finds the budget full is refused RESOURCE_EXHAUSTED without
// its request being read, and reaches no decider.
func TestGRPC_inflightBudgetFullRefuses(t *testing.T) {
	budget, err := inflight.New(inflight.Config{MaxBytes: 1, MaxWait: 10 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	release, err := budget.Acquire(t.Context(), "test", 1)
	if err != nil {
		t.Fatal(err)
	}
	d := &fakeDecider{}
	conn := grpclimittest.DialRaw(t, startGatedGRPC(t, d, budget))
	raw := descriptor("user", "u1")
	var out weirv1.DecideResponse
	if err := conn.Invoke(withTimeout(t), "/weir.v1.RateLimiter/Decide", &raw, &out); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("full budget: %v, want RESOURCE_EXHAUSTED", err)
	}
	if n := d.callCount(); n != 0 {
		t.Fatalf("%d requests reached the decider", n)
	}
	release()
	if err := conn.Invoke(withTimeout(t), "/weir.v1.RateLimiter/Decide", &raw, &out); err != nil || !out.GetAllowed() {
		t.Fatalf("after the release: %v, %v", &out, err)
	}
}

// An HTTP body that finds the budget full is answered 503 with
// Retry-After, unread; with room it is decided.
func TestHTTP_inflightBudgetFull503(t *testing.T) {
	budget, err := inflight.New(inflight.Config{MaxBytes: 1 << 20, MaxWait: 10 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultHTTPConfig()
	cfg.InFlight = budget
	d := &fakeDecider{}
	h := NewHTTPHandler(cfg, d, nil, nil, nil)
	post := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		body := `{"descriptors":{"user":"u1"}}`
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/decide", bytes.NewBufferString(body)))
		return rec
	}
	release, err := budget.Acquire(t.Context(), "test", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if rec := post(); rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" || !strings.Contains(rec.Body.String(), "receiving too many bytes") {
		t.Fatalf("full budget: %d %q %s, want 503 with Retry-After: 1", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if n := d.callCount(); n != 0 {
		t.Fatalf("%d requests reached the decider", n)
	}
	release()
	if rec := post(); rec.Code != http.StatusOK {
		t.Fatalf("after the release: %d %s", rec.Code, rec.Body)
	}
}

func TestBodyReservation(t *testing.T) {
	for _, tc := range []struct{ declared, want int64 }{{-1, 100}, {0, 1}, {40, 40}, {100, 100}, {101, 100}} {
		if got := bodyReservation(tc.declared, 100); got != tc.want {
			t.Errorf("bodyReservation(%d, 100) = %d, want %d", tc.declared, got, tc.want)
		}
	}
}
