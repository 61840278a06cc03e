package writebehind_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/redisbackend"
	"github.com/weirhq/weir/redisbackend/redistest"
	"github.com/weirhq/weir/writebehind"
)

// realNow is the local clock in microseconds; on one machine it is Redis's.
func realNow() int64 { return time.Now().UnixNano() }

// patient is the timeout of calls whose duration is not what a test
// checks: long enough that no load on the machine reaches it.
const patient = time.Minute

// newBackend returns a backend of srv whose calls end only at timeout: its
// client has no read or write timeout of its own (a paused Redis holds a
// call until then).
func newBackend(t *testing.T, srv *redistest.Server, timeout time.Duration) *redisbackend.Backend {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:                  srv.Addr(),
		ContextTimeoutEnabled: true,
		DialTimeout:           time.Second,
		ReadTimeout:           -1, // the context's deadline only
		WriteTimeout:          -1,
	})
	t.Cleanup(func() { _ = c.Close() })
	cfg := redisbackend.DefaultConfig()
	cfg.Timeout = timeout
	be, err := redisbackend.New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return be
}

// checkStored loads want's keys and compares.
func checkStored(t *testing.T, be *redisbackend.Backend, want map[string]int64) {
	t.Helper()
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	got, err := be.LoadTATs(t.Context(), keys)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	bad := 0
	for i, k := range keys {
		if got[i] != want[k] {
			if bad++; bad <= 5 {
				t.Errorf("%s = %d in Redis, want %d", k, got[i], want[k])
			}
		}
	}
	if bad > 5 {
		t.Errorf("... %d keys wrong in all", bad)
	}
}

func TestWriter_Flush_realRedisManyGoroutines(t *testing.T) {
	srv := redistest.Start(t)
	be := newBackend(t, srv, patient)
	reg := prometheus.NewRegistry()
	sink := &countingSink{Sink: be}
	w := newWriter(t, testConfig(), sink, realNow, reg)
	stop := runWriter(t, w)

	const goroutines, keys, rounds = 8, 2000, 5
	base := realNow() + time.Hour.Nanoseconds()
	key := func(i int) string { return fmt.Sprintf("rl:{t%d}:k%d", i%10, i) }
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			// Each key is marked by one goroutine, in increasing order, as
			// an owner marks in decision order; the Run loop flushes
			// meanwhile.
			for r := range rounds {
				for i := g; i < keys; i += goroutines {
					w.Mark(key(i), base+int64(i*1000+r))
				}
			}
		})
	}
	wg.Wait()
	if err := w.Flush(t.Context()); err != nil {
		t.Fatalf("flush: %v", err)
	}
	want := make(map[string]int64, keys)
	for i := range keys {
		want[key(i)] = base + int64(i*1000+rounds-1)
	}
	checkStored(t, be, want)
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	// Every TAT sent is one command, written or not: a call that failed
	// (Redis slow past the timeout on a loaded machine) sent its TATs, and
	// they were sent again by the retry.
	written := metricValue(t, reg, "weir_writebehind_tats_written_total", "")
	commands := metricValue(t, reg, "weir_redis_commands_total", "store_tats")
	failed := float64(sink.failedTATs.Load())
	if written < keys || commands != written+failed {
		t.Errorf("written %g, in failed calls %g, commands %g: want written >= %d and commands = written + failed", written, failed, commands, keys)
	}
}

func TestWriter_Flush_realRedisPastTATDeletes(t *testing.T) {
	srv := redistest.Start(t)
	be := newBackend(t, srv, patient)
	if err := srv.Client().Set(t.Context(), "rl:{a}:rested", "123", 0).Err(); err != nil {
		t.Fatal(err)
	}
	w := newWriter(t, testConfig(), be, realNow, nil)
	// Past by more than the backend's expiry grace: rested on any clock.
	w.Mark("rl:{a}:rested", realNow()-redisbackend.ExpiryGrace.Nanoseconds()-1)
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := srv.Client().Exists(t.Context(), "rl:{a}:rested").Val(); n != 0 {
		t.Error("a TAT in the past left its key in Redis")
	}
}

// countingSink counts calls into a Sink as they start and as they return,
// and the TATs of the calls that failed.
type countingSink struct {
	writebehind.Sink
	started    atomic.Int64
	returned   atomic.Int64
	failedTATs atomic.Int64
}

func (s *countingSink) StoreTATs(ctx context.Context, tats []redisbackend.TAT) error {
	s.started.Add(1)
	defer s.returned.Add(1)
	err := s.Sink.StoreTATs(ctx, tats)
	if err != nil {
		s.failedTATs.Add(int64(len(tats)))
	}
	return err
}

// Marks never wait for a store: all of them finish while a store is stuck
// on the paused Redis. The store's timeout is a minute, so the check is on
// order, not speed: had Mark waited for the store, the store would have
// returned (at its timeout, or after the resume) before the marks were done,
// however fast or slow the machine.
func TestWriter_Mark_neverBlocksWhileRedisPaused(t *testing.T) {
	srv := redistest.Start(t)
	cfg := testConfig()
	cfg.Timeout = patient // the stuck store outlives the Mark loop
	be := newBackend(t, srv, cfg.Timeout)
	sink := &countingSink{Sink: be}
	clk := newManual()
	w := newWriter(t, cfg, sink, realNow, nil, writebehind.WithClock(clk))
	stop := runWriter(t, w)

	base := realNow() + time.Hour.Nanoseconds()
	srv.Pause()
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume()
		}
	}()
	before := sink.started.Load()
	w.Mark("rl:{p}:first", base)
	clk.Advance(waitArmed(t, clk)) // the first flush starts and gets stuck
	waitFor(t, "a store stuck on the paused Redis", func() bool { return sink.started.Load() > before })
	returned := sink.returned.Load()

	const marks = 100_000
	want := make(map[string]int64, 1000)
	want["rl:{p}:first"] = base
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("rl:{p}:k%d", i)
	}
	for i := range marks {
		w.Mark(keys[i%len(keys)], base+int64(i))
	}
	if n := sink.returned.Load() - returned; n != 0 {
		t.Errorf("%d stores returned before %d marks were done while Redis was paused: Mark waited for a store", n, marks)
	}
	for i := marks - len(keys); i < marks; i++ {
		want[keys[i%len(keys)]] = base + int64(i)
	}
	if got := w.Pending(); got < len(keys) {
		t.Errorf("pending = %d while paused, want >= %d", got, len(keys))
	}

	srv.Resume()
	resumed = true
	waitFlushed(t, clk, w) // the stuck flush has finished
	fireRun(t, clk, w)     // the first flush started after every mark
	if got := w.Pending(); got != 0 {
		t.Errorf("pending = %d after the first flush since the resume, want 0", got)
	}
	checkStored(t, be, want)
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
}

// outageSink gives every call a short deadline while outage is set, so
// that stores to a paused Redis fail fast, and passes calls through
// otherwise.
type outageSink struct {
	writebehind.Sink
	outage atomic.Bool
}

func (s *outageSink) StoreTATs(ctx context.Context, tats []redisbackend.TAT) error {
	if s.outage.Load() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Millisecond)
		defer cancel()
	}
	return s.Sink.StoreTATs(ctx, tats)
}

// Stores that fail while Redis is paused are retried until they succeed
// after it resumes. Only the stores during the pause have a short deadline:
// with it after the resume too, a loaded machine could fail every retry.
func TestWriter_Run_realRedisOutageRetried(t *testing.T) {
	srv := redistest.Start(t)
	cfg := testConfig()
	cfg.Timeout = patient
	be := newBackend(t, srv, patient)
	sink := &outageSink{Sink: be}
	reg := prometheus.NewRegistry()
	clk := newManual()
	w := newWriter(t, cfg, sink, realNow, reg, writebehind.WithClock(clk))
	stop := runWriter(t, w)

	base := realNow() + time.Hour.Nanoseconds()
	sink.outage.Store(true)
	srv.Pause()
	want := map[string]int64{}
	for i := range 3000 {
		k := fmt.Sprintf("rl:{o%d}:k%d", i%7, i%900)
		want[k] = base + int64(i)
		w.Mark(k, base+int64(i))
	}
	fireRun(t, clk, w)
	fireRun(t, clk, w)
	if got := metricValue(t, reg, "weir_writebehind_flushes_total", "error"); got != 2 {
		t.Fatalf("failed flushes = %g after two flushes during the outage, want 2", got)
	}
	sink.outage.Store(false)
	srv.Resume()
	fireRun(t, clk, w)
	if got := w.Pending(); got != 0 {
		t.Errorf("pending = %d after the first flush since the resume, want 0", got)
	}
	checkStored(t, be, want)
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
}
