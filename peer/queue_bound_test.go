package peer

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/metrictest"
)

// While the peer's RPC slot is busy, at most MaxQueue items wait; the next
// fails at once with ErrQueueFull and is counted, and the queued ones are
// still answered when the peer returns. Had the call waited for room
// instead, the client's Timeout (a minute away) would have ended it.
func TestClient_Decide_queueFullFailsFast(t *testing.T) {
	gate, release := newGate(t)
	h := &fakeHandler{gate: gate, entered: make(chan struct{}, 10)}
	addr := startServer(t, h)
	c, reg := newClient(t, func(cfg *ClientConfig) { cfg.MaxInFlight, cfg.MaxQueue, cfg.Timeout = 1, 2, ruledOut })

	var wg sync.WaitGroup
	errs := make(chan error, 3)
	wg.Go(func() { _, err := c.Decide(t.Context(), addr, item(0)); errs <- err })
	<-h.entered
	for i := range 2 {
		wg.Go(func() { _, err := c.Decide(t.Context(), addr, item(int64(i+1))); errs <- err })
	}
	waitFor(t, "two queued calls", func() bool { return queued(c, addr) == 2 })
	start := time.Now()
	_, err := c.Decide(t.Context(), addr, item(9))
	if !errors.Is(err, ErrQueueFull) {
		t.Fatalf("err = %v, want ErrQueueFull", err)
	}
	returnedBefore(t, time.Since(start))
	if got := metrictest.Value(t, reg, "weir_forwards_total", "result", "queue_full"); got != 1 {
		t.Fatalf("queue_full counted %v times, want 1", got)
	}
	release()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a queued call failed: %v", err)
		}
	}
}
