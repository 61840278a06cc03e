package peer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/decide"
)

// countingHandler allows everything and counts RPCs and items.
type countingHandler struct{ rpcs, items atomic.Int64 }

func (h *countingHandler) HandleDecide(_ context.Context, _ string, items []decide.Request) []Result {
	h.rpcs.Add(1)
	h.items.Add(int64(len(items)))
	out := make([]Result, len(items))
	for i, it := range items {
		out[i] = echo(it)
	}
	return out
}

// BenchmarkClient_Decide forwards decisions over loopback from 16 concurrent
// callers and reports decisions/s and the mean batch size, for several
// in-flight limits and windows.
func BenchmarkClient_Decide(b *testing.B) {
	for _, bc := range []struct {
		inflight int
		window   time.Duration
	}{{1, 0}, {2, 0}, {4, 0}, {2, 50 * time.Microsecond}} {
		b.Run(fmt.Sprintf("inflight=%d/window=%v", bc.inflight, bc.window), func(b *testing.B) {
			benchDecide(b, 16, bc.inflight, bc.window)
		})
	}
}

func benchDecide(b *testing.B, callers, inflight int, window time.Duration) {
	h := &countingHandler{}
	addr := startServer(b, h)
	c, _ := newClient(b, func(cfg *ClientConfig) {
		cfg.MaxInFlight = inflight
		cfg.Window = window
		cfg.Timeout = time.Second
	})
	if _, err := c.Decide(b.Context(), addr, item(0)); err != nil { // connect
		b.Fatal(err)
	}
	h.rpcs.Store(0)
	h.items.Store(0)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range callers {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if _, err := c.Decide(b.Context(), addr, item(1)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "decisions/s")
	b.ReportMetric(float64(h.items.Load())/float64(max(h.rpcs.Load(), 1)), "items/batch")
}
