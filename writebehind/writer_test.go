package writebehind_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/weirhq/weir/limitkey"
	"github.com/weirhq/weir/redisbackend"
	"github.com/weirhq/weir/writebehind"
)

func TestConfig_Validate(t *testing.T) {
	if err := writebehind.DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	for name, mut := range map[string]func(*writebehind.Config){
		"zero interval":          func(c *writebehind.Config) { c.FlushInterval = 0 },
		"zero batch":             func(c *writebehind.Config) { c.MaxBatch = 0 },
		"zero timeout":           func(c *writebehind.Config) { c.Timeout = 0 },
		"backoff below interval": func(c *writebehind.Config) { c.MaxBackoff = c.FlushInterval - 1 },
	} {
		cfg := writebehind.DefaultConfig()
		mut(&cfg)
		if cfg.Validate() == nil {
			t.Errorf("%s: Validate accepted %+v", name, cfg)
		}
		if _, err := writebehind.New(cfg, newFakeSink(), newFakeNow(1).Now, nil, nil); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
	if _, err := writebehind.New(writebehind.DefaultConfig(), nil, newFakeNow(1).Now, nil, nil); err == nil {
		t.Error("New accepted a nil sink")
	}
}

func TestWriter_Mark_coalescesToLargest(t *testing.T) {
	sink := newFakeSink()
	w := newWriter(t, testConfig(), sink, newFakeNow(1).Now, nil)
	for _, tat := range []int64{5, 10, 7} {
		w.Mark("k", tat)
	}
	w.Mark("other", 3)
	if got := w.Pending(); got != 2 {
		t.Fatalf("pending = %d, want 2", got)
	}
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	stored, batches, _ := sink.snapshot()
	if stored["k"] != 10 || stored["other"] != 3 || len(stored) != 2 {
		t.Errorf("stored = %v, want k=10 other=3", stored)
	}
	if len(batches) != 1 || batches[0] != 2 {
		t.Errorf("batches = %v, want one of 2", batches)
	}
	if got := w.Pending(); got != 0 {
		t.Errorf("pending after flush = %d", got)
	}
}

func TestWriter_Mark_dropsUnstorable(t *testing.T) {
	reg := prometheus.NewRegistry()
	w := newWriter(t, testConfig(), newFakeSink(), newFakeNow(1).Now, reg)
	w.Mark("", 1)
	w.Mark("k", -1)
	w.Mark("k", redisbackend.MaxTime+1)
	if got := w.Pending(); got != 0 {
		t.Errorf("pending = %d, want 0", got)
	}
	if got := metricValue(t, reg, "weir_writebehind_dropped_total", ""); got != 3 {
		t.Errorf("dropped = %g, want 3", got)
	}
	w.Mark("k", redisbackend.MaxTime)
	if got := w.Pending(); got != 1 {
		t.Errorf("pending after the largest valid TAT = %d, want 1", got)
	}
}

func TestWriter_Flush_batchesOfMaxBatch(t *testing.T) {
	cfg := testConfig()
	cfg.MaxBatch = 100
	sink := newFakeSink()
	w := newWriter(t, cfg, sink, newFakeNow(1).Now, nil)
	for i := range 1050 {
		w.Mark(fmt.Sprintf("k%d", i), int64(i))
	}
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	stored, batches, _ := sink.snapshot()
	if len(stored) != 1050 {
		t.Fatalf("stored %d keys, want 1050", len(stored))
	}
	if len(batches) != 11 {
		t.Errorf("%d calls, want ceil(1050/100) = 11: %v", len(batches), batches)
	}
	for _, n := range batches {
		if n > 100 {
			t.Errorf("batch of %d exceeds MaxBatch 100", n)
		}
	}
}

// blockFirstCall makes the sink's first call signal entered and wait for
// release (or its context); later calls pass. result is what the first
// call returns once released.
func blockFirstCall(sink *fakeSink, result error) (entered, release chan struct{}) {
	entered, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	sink.setHook(func(ctx context.Context, _ []redisbackend.TAT) error {
		first := false
		once.Do(func() { first = true })
		if !first {
			return nil
		}
		close(entered)
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		return result
	})
	return entered, release
}

func TestWriter_Mark_duringSlowFlushNotLost(t *testing.T) {
	sink := newFakeSink()
	entered, release := blockFirstCall(sink, nil)
	w := newWriter(t, testConfig(), sink, newFakeNow(1).Now, nil)
	w.Mark("k", 100)
	w.Mark("j", 100)
	done := make(chan error, 1)
	go func() { done <- w.Flush(context.Background()) }()
	<-entered
	if got := w.Pending(); got != 2 {
		t.Errorf("pending during flush = %d, want the 2 in flight", got)
	}
	w.Mark("k", 200) // newer value while 100 is being written
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if v, _ := sink.get("k"); v != 100 {
		t.Fatalf("first flush stored k=%d, want 100", v)
	}
	if got := w.Pending(); got != 1 {
		t.Fatalf("pending = %d, want k still dirty", got)
	}
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if v, _ := sink.get("k"); v != 200 {
		t.Errorf("k = %d, want the re-marked 200", v)
	}
}

func TestWriter_Flush_failurePutsBackLarger(t *testing.T) {
	tests := []struct {
		name   string
		remark int64 // marked while the failing flush of 100 runs; 0: none
		want   int64
	}{
		{"no re-mark", 0, 100},
		{"newer re-mark wins", 200, 200},
		{"smaller re-mark loses", 50, 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sink := newFakeSink()
			entered, release := blockFirstCall(sink, errSink)
			w := newWriter(t, testConfig(), sink, newFakeNow(1).Now, nil)
			w.Mark("k", 100)
			done := make(chan error, 1)
			go func() { done <- w.Flush(context.Background()) }()
			<-entered
			if tc.remark != 0 {
				w.Mark("k", tc.remark)
			}
			close(release)
			if err := <-done; err != nil { // Flush retries after the failure
				t.Fatal(err)
			}
			if v, _ := sink.get("k"); v != tc.want {
				t.Errorf("k = %d, want %d", v, tc.want)
			}
			if got := w.Pending(); got != 0 {
				t.Errorf("pending = %d, want 0", got)
			}
		})
	}
}

func TestWriter_Run_sinkRecoversNothingLost(t *testing.T) {
	reg := prometheus.NewRegistry()
	sink := newFakeSink()
	sink.setFailing(true)
	clk := newManual()
	w := newWriter(t, writebehind.DefaultConfig(), sink, newFakeNow(1).Now, reg, writebehind.WithClock(clk))
	stop := runWriter(t, w)

	want := map[string]int64{}
	for i := range 2000 {
		k := fmt.Sprintf("k%d", i%500)
		want[k] = int64(i)
		w.Mark(k, int64(i))
	}
	for range 3 { // three failed flushes, one call each (500 keys < MaxBatch)
		fireRun(t, clk, w)
	}
	if _, _, calls := sink.snapshot(); calls != 3 {
		t.Fatalf("%d sink calls after three flushes, want 3", calls)
	}
	for i := 2000; i < 3000; i++ { // keep marking while Redis is down
		k := fmt.Sprintf("k%d", i%700)
		want[k] = int64(i)
		w.Mark(k, int64(i))
	}
	if got := w.Pending(); got != 700 {
		t.Errorf("pending while failing = %d, want all 700 keys", got)
	}
	sink.setFailing(false)
	fireRun(t, clk, w)
	if got := w.Pending(); got != 0 {
		t.Errorf("pending after the first flush since recovery = %d, want 0", got)
	}
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	stored, _, _ := sink.snapshot()
	if len(stored) != len(want) {
		t.Errorf("stored %d keys, want %d", len(stored), len(want))
	}
	for k, v := range want {
		if stored[k] != v {
			t.Errorf("%s = %d, want %d", k, stored[k], v)
		}
	}
	if got := metricValue(t, reg, "weir_writebehind_flushes_total", "error"); got != 3 {
		t.Errorf("failed flushes = %g, want 3", got)
	}
	if got := metricValue(t, reg, "weir_writebehind_tats_written_total", ""); got < float64(len(want)) {
		t.Errorf("written = %g, want >= %d", got, len(want))
	}
}

func TestWriter_FlushKeys_onlyMatching(t *testing.T) {
	sink := newFakeSink()
	w := newWriter(t, testConfig(), sink, newFakeNow(1).Now, nil)
	for i := range 300 {
		w.Mark(fmt.Sprintf("rl:{a}:%d", i), 10)
		w.Mark(fmt.Sprintf("rl:{b}:%d", i), 20)
	}
	inA := func(k string) bool { return limitkey.HashTag(k) == "a" }
	if err := w.FlushKeys(t.Context(), inA); err != nil {
		t.Fatal(err)
	}
	stored, _, _ := sink.snapshot()
	if len(stored) != 300 {
		t.Errorf("stored %d keys, want the 300 of group a", len(stored))
	}
	for k := range stored {
		if !inA(k) {
			t.Errorf("stored %s, not in group a", k)
		}
	}
	if got := w.Pending(); got != 300 {
		t.Errorf("pending = %d, want group b's 300", got)
	}
}

// A flush with nothing to store succeeds even when its context has ended
// (a node's ring change after its hand-off flushes with the ended context
// of its shutdown: no error, no warning).
func TestWriter_FlushKeys_nothingPendingEndedContext(t *testing.T) {
	sink := newFakeSink()
	w := newWriter(t, testConfig(), sink, newFakeNow(1).Now, nil)
	w.Mark("rl:{b}:1", 10)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	inA := func(k string) bool { return limitkey.HashTag(k) == "a" }
	for i := range 50 { // the slot and the ended context were both ready: a coin toss
		if err := w.FlushKeys(ctx, inA); err != nil {
			t.Fatalf("flush %d of nothing with an ended context: %v", i, err)
		}
	}
	if _, _, n := sink.snapshot(); n != 0 || w.Pending() != 1 {
		t.Errorf("%d sink calls, %d pending; want none and group b's one", n, w.Pending())
	}
}

// FlushKeys retries a failing sink until its context ends. The context
// ends at the third call, whatever the time: a deadline of a few
// milliseconds could pass before the first call on a loaded machine.
func TestWriter_FlushKeys_retriesUntilContextEnds(t *testing.T) {
	sink := newFakeSink()
	sink.setFailing(true)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var calls atomic.Int32
	sink.setHook(func(context.Context, []redisbackend.TAT) error {
		if calls.Add(1) == 3 {
			cancel()
		}
		return nil // the sink fails
	})
	w := newWriter(t, testConfig(), sink, newFakeNow(1).Now, nil)
	w.Mark("rl:{a}:1", 10)
	err := w.FlushKeys(ctx, func(string) bool { return true })
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errSink) {
		t.Errorf("err = %v, want both the context's end and the sink error", err)
	}
	if _, _, n := sink.snapshot(); n != 3 {
		t.Errorf("%d calls, want 3: retries until the context ended, none after", n)
	}
	if got := w.Pending(); got != 1 {
		t.Errorf("pending = %d, want the key kept", got)
	}
}

func TestWriter_Run_finalFlushOnCancel(t *testing.T) {
	sink := newFakeSink()
	clk := newManual() // never moved: only the final flush can store anything
	w := newWriter(t, writebehind.DefaultConfig(), sink, newFakeNow(1).Now, nil, writebehind.WithClock(clk))
	stop := runWriter(t, w)
	w.Mark("k", 42)
	waitArmed(t, clk)
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if v, ok := sink.get("k"); !ok || v != 42 {
		t.Errorf("k = %d (stored %v), want 42 from the final flush", v, ok)
	}
}

func TestWriter_Run_finalFlushFailureReported(t *testing.T) {
	cfg := writebehind.DefaultConfig()
	cfg.Timeout = 20 * time.Millisecond // a real context deadline
	sink := newFakeSink()
	sink.setHook(func(ctx context.Context, _ []redisbackend.TAT) error {
		<-ctx.Done() // a hung Redis
		return ctx.Err()
	})
	clk := newManual() // never moved: only the final flush calls the sink
	w := newWriter(t, cfg, sink, newFakeNow(1).Now, nil, writebehind.WithClock(clk))
	stop := runWriter(t, w)
	w.Mark("k", 42)
	waitArmed(t, clk)
	err := stop()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("run = %v, want the final flush's timeout", err)
	}
	if got := w.Pending(); got != 1 {
		t.Errorf("pending = %d, want 1", got)
	}
}

func TestWriter_metrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	now := newFakeNow(1_000_000_000)
	sink := newFakeSink()
	w := newWriter(t, testConfig(), sink, now.Now, reg)
	w.Mark("a", 5_000_000_000)
	w.Mark("b", 5_000_000_000)
	now.us.Store(1_002_500_000) // 2.5ms later, in nanoseconds
	if got := metricValue(t, reg, "weir_writebehind_pending", ""); got != 2 {
		t.Errorf("pending gauge = %g, want 2", got)
	}
	if got := metricValue(t, reg, "weir_writebehind_lag_seconds", ""); got != 0.0025 {
		t.Errorf("lag = %g, want 0.0025", got)
	}
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, label string
		want        float64
	}{
		{"weir_writebehind_pending", "", 0},
		{"weir_writebehind_lag_seconds", "", 0},
		{"weir_writebehind_flushes_total", "ok", 1},
		{"weir_writebehind_tats_written_total", "", 2},
		{"weir_redis_commands_total", "store_tats", 2},
	} {
		if got := metricValue(t, reg, c.name, c.label); got != c.want {
			t.Errorf("%s{%s} = %g, want %g", c.name, c.label, got, c.want)
		}
	}
}

func TestNew_sharesRedisCommandsCounter(t *testing.T) {
	reg := prometheus.NewRegistry()
	other := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_redis_commands_total",
		Help: "Redis commands sent, by operation.",
	}, []string{"op"})
	reg.MustRegister(other)
	other.WithLabelValues("decide").Add(7)
	w := newWriter(t, testConfig(), newFakeSink(), newFakeNow(1).Now, reg)
	w.Mark("k", 5)
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(other.WithLabelValues("store_tats")); got != 1 {
		t.Errorf("store_tats on the shared counter = %g, want 1", got)
	}
	if _, err := writebehind.New(testConfig(), newFakeSink(), newFakeNow(1).Now, nil, reg); err == nil {
		t.Error("a second Writer on one registry registered its own gauges")
	}
}

// metricValue reads one gathered counter or gauge; label, if not empty,
// selects the series whose only label has that value.
func metricValue(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label != "" && (len(m.GetLabel()) != 1 || m.GetLabel()[0].GetValue() != label) {
				continue
			}
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	t.Fatalf("no %s{%s} among %s", name, label, strings.Join(names, ", "))
	return 0
}

func TestWriter_Mark_concurrentSameKeysKeepsLargest(t *testing.T) {
	sink := newFakeSink()
	w := newWriter(t, testConfig(), sink, newFakeNow(1).Now, nil)
	const goroutines, keys = 16, 500
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range keys {
				// Goroutine g's value for key i; the largest is from g = 15.
				w.Mark(fmt.Sprintf("k%d", i), int64(i*100+g))
			}
		})
	}
	wg.Wait()
	if got := w.Pending(); got != keys {
		t.Fatalf("pending = %d, want %d", got, keys)
	}
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	stored, _, _ := sink.snapshot()
	for i := range keys {
		if k := fmt.Sprintf("k%d", i); stored[k] != int64(i*100+goroutines-1) {
			t.Errorf("%s = %d, want %d", k, stored[k], i*100+goroutines-1)
		}
	}
}
