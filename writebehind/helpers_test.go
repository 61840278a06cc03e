package writebehind_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/weirhq/weir/clock/clocktest"
	"github.com/weirhq/weir/redisbackend"
	"github.com/weirhq/weir/writebehind"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errSink = errors.New("fake sink: down")

// fakeSink stores TATs in a map, overwriting like Redis does. While
// failing is set every call fails; hook, if set, runs first in every call
// and can block or fail it.
type fakeSink struct {
	mu      sync.Mutex
	stored  map[string]int64
	batches []int // sizes of the successful calls
	calls   int
	failing bool
	hook    func(ctx context.Context, tats []redisbackend.TAT) error
}

var _ writebehind.Sink = (*fakeSink)(nil)

func newFakeSink() *fakeSink { return &fakeSink{stored: map[string]int64{}} }

func (s *fakeSink) StoreTATs(ctx context.Context, tats []redisbackend.TAT) error {
	s.mu.Lock()
	s.calls++
	hook := s.hook
	s.mu.Unlock()
	if hook != nil {
		if err := hook(ctx, tats); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failing {
		return errSink
	}
	for _, t := range tats {
		if t.Now <= 0 || t.Key == "" {
			return errors.New("fake sink: invalid tat")
		}
		s.stored[t.Key] = t.TAT
	}
	s.batches = append(s.batches, len(tats))
	return nil
}

func (s *fakeSink) setFailing(f bool) {
	s.mu.Lock()
	s.failing = f
	s.mu.Unlock()
}

func (s *fakeSink) setHook(h func(context.Context, []redisbackend.TAT) error) {
	s.mu.Lock()
	s.hook = h
	s.mu.Unlock()
}

func (s *fakeSink) get(key string) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.stored[key]
	return v, ok
}

func (s *fakeSink) snapshot() (stored map[string]int64, batches []int, calls int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	stored = make(map[string]int64, len(s.stored))
	for k, v := range s.stored {
		stored[k] = v
	}
	return stored, append([]int(nil), s.batches...), s.calls
}

// fakeNow is a settable clock (nanoseconds, as TATs).
type fakeNow struct{ us atomic.Int64 }

func newFakeNow(us int64) *fakeNow {
	f := &fakeNow{}
	f.us.Store(us)
	return f
}

func (f *fakeNow) Now() int64 { return f.us.Load() }

// testConfig flushes often and backs off briefly, so loops finish fast.
func testConfig() writebehind.Config {
	cfg := writebehind.DefaultConfig()
	cfg.FlushInterval = time.Millisecond
	cfg.MaxBackoff = 20 * time.Millisecond
	cfg.Timeout = 10 * time.Second
	return cfg
}

func newWriter(t testing.TB, cfg writebehind.Config, sink writebehind.Sink, now func() int64, reg prometheus.Registerer, opts ...writebehind.Option) *writebehind.Writer {
	t.Helper()
	w, err := writebehind.New(cfg, sink, now, nil, reg, opts...)
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	return w
}

// runWriter starts w.Run and returns a function that cancels it and
// returns Run's result.
func runWriter(t *testing.T, w *writebehind.Writer) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			err = <-done
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// waitFor polls cond until it holds, failing the test after 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-time.After(time.Millisecond)
	}
}

// newManual returns a manual clock for a Writer's timers.
func newManual() *clocktest.Manual { return clocktest.NewManual(time.Unix(1_700_000_000, 0)) }

// waitArmed waits until the Writer's Run (the only user of clk) has armed
// its timer, that is, finished its last flush, and returns the delay the
// timer waits, from now.
func waitArmed(t *testing.T, clk *clocktest.Manual) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := clk.WaitForTimers(ctx, 1); err != nil {
		t.Fatalf("Run armed no timer: %v", err)
	}
	return clk.Timers()[0].Sub(clk.Now())
}

// fireRun waits until w's Run has armed its timer, moves clk to its
// deadline and waits until the flush that fires has finished (waitFlushed).
// It returns the delay the timer waited.
func fireRun(t *testing.T, clk *clocktest.Manual, w *writebehind.Writer) time.Duration {
	t.Helper()
	d := waitArmed(t, clk)
	clk.Advance(d)
	waitFlushed(t, clk, w)
	return d
}

// waitFlushed waits until w's Run has finished its flush: it armed its
// timer again (something is pending, or the flush failed), or it sleeps
// until the next mark (nothing is).
func waitFlushed(t *testing.T, clk *clocktest.Manual, w *writebehind.Writer) {
	t.Helper()
	waitFor(t, "Run to arm its timer or sleep", func() bool { return len(clk.Timers()) > 0 || w.Sleeping() })
}
