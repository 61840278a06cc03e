package inflight

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func newBudget(t *testing.T, maxBytes int64, wait time.Duration) (*Budget, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	b, err := New(Config{MaxBytes: maxBytes, MaxWait: wait}, reg)
	if err != nil {
		t.Fatal(err)
	}
	return b, reg
}

func TestConfig_Validate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default: %v", err)
	}
	err := Config{}.Validate()
	for _, want := range []string{"max bytes 0 must be positive", "max wait 0s must be positive"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("zero config: %v, want %q", err, want)
		}
	}
}

func TestBudget_Acquire_fullBudgetRefusesAfterMaxWait(t *testing.T) {
	b, reg := newBudget(t, 100, 20*time.Millisecond)
	release, err := b.Acquire(t.Context(), "c", 60)
	if err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(b.reserved); got != 60 {
		t.Fatalf("reserved %v, want 60", got)
	}
	if _, err := b.Acquire(t.Context(), "c", 41); !errors.Is(err, ErrFull) {
		t.Fatalf("41 bytes over a budget with 40 free: %v, want ErrFull", err)
	}
	if n := testutil.ToFloat64(b.refused); n != 1 {
		t.Fatalf("refused %v, want 1", n)
	}
	second, err := b.Acquire(t.Context(), "c", 40)
	if err != nil {
		t.Fatalf("40 bytes into the 40 free: %v", err)
	}
	release()
	second()
	if got := testutil.ToFloat64(b.reserved); got != 0 {
		t.Fatalf("reserved %v after both releases, want 0", got)
	}
	if n, err := testutil.GatherAndCount(reg, "weir_inflight_max_bytes"); err != nil || n != 1 {
		t.Fatalf("weir_inflight_max_bytes: %d series, %v", n, err)
	}
}

func TestBudget_Acquire_waiterGetsReleasedBytes(t *testing.T) {
	b, _ := newBudget(t, 100, time.Minute)
	release, err := b.Acquire(t.Context(), "c", 100)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		r, err := b.Acquire(t.Context(), "c", 50)
		if err == nil {
			r()
		}
		got <- err
	}()
	release()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not get the released bytes")
	}
}

func TestBudget_Acquire_contextEndsFirst(t *testing.T) {
	b, _ := newBudget(t, 10, time.Minute)
	release, err := b.Acquire(t.Context(), "c", 10)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if _, err := b.Acquire(ctx, "c", 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v, want the context's error", err)
	}
	if n := testutil.ToFloat64(b.refused); n != 0 {
		t.Fatalf("a caller's own deadline counted as a refusal (%v)", n)
	}
}

func TestBudget_Acquire_oversizedIsCutToTheBudget(t *testing.T) {
	b, _ := newBudget(t, 10, time.Millisecond)
	release, err := b.Acquire(t.Context(), "c", 1<<40)
	if err != nil {
		t.Fatalf("a request larger than the whole budget must still go alone: %v", err)
	}
	release()
	if _, err := b.Acquire(t.Context(), "c", 0); err == nil {
		t.Fatal("a zero reservation was accepted")
	}
}

// waitFor waits until cond holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // polling a condition, with a deadline
	}
}

func (b *Budget) queued(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.mu.waiting[key])
}

// A caller that floods the budget waits behind its own requests: a request
// of another caller that arrives after ten of the flood's is served second.
func TestBudget_Acquire_roundRobinBetweenCallers(t *testing.T) {
	b, _ := newBudget(t, 1, time.Minute)
	hold, err := b.Acquire(t.Context(), "flood", 1)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	acquire := func(key string, i int) {
		wg.Go(func() {
			release, err := b.Acquire(t.Context(), key, 1)
			if err != nil {
				t.Errorf("%s %d: %v", key, i, err)
				return
			}
			mu.Lock()
			order = append(order, fmt.Sprint(key, i))
			mu.Unlock()
			release()
		})
	}
	for i := range 10 {
		acquire("flood", i)
		waitFor(t, "the flood's request to queue", func() bool { return b.queued("flood") == i+1 })
	}
	acquire("small", 0)
	waitFor(t, "the small request to queue", func() bool { return b.queued("small") == 1 })
	hold()
	wg.Wait()
	if len(order) != 11 || order[0] != "flood0" || order[1] != "small0" || order[10] != "flood9" {
		t.Fatalf("grant order %v, want flood0, small0, then flood1..flood9", order)
	}
}

// A large request at the head is not passed over by smaller ones; when it
// gives up, it leaves the queue and the smaller one behind it is served.
func TestBudget_Acquire_abandonedWaiterLeavesTheQueue(t *testing.T) {
	b, _ := newBudget(t, 2, time.Minute)
	hold, err := b.Acquire(t.Context(), "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer hold()
	ctx, cancel := context.WithCancel(t.Context())
	gaveUp := make(chan error, 1)
	go func() { _, err := b.Acquire(ctx, "big", 2); gaveUp <- err }()
	waitFor(t, "the big request to queue", func() bool { return b.queued("big") == 1 })
	got := make(chan error, 1)
	go func() {
		r, err := b.Acquire(t.Context(), "small", 1)
		if err == nil {
			r()
		}
		got <- err
	}()
	waitFor(t, "the small request to queue", func() bool { return b.queued("small") == 1 })
	select {
	case err := <-got:
		t.Fatalf("the small request passed the big one at the head: %v", err)
	default:
	}
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("big: %v, want context.Canceled", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("small: %v", err)
	}
	if n := b.queued("big") + b.queued("small"); n != 0 {
		t.Fatalf("%d requests still queued", n)
	}
}

func TestBudget_TryAcquire_neverWaitsNorJumpsTheQueue(t *testing.T) {
	b, _ := newBudget(t, 100, time.Minute)
	if _, ok := b.TryAcquire(0); ok {
		t.Fatal("TryAcquire(0) reserved")
	}
	first, ok := b.TryAcquire(70)
	if !ok {
		t.Fatal("70 bytes of a free budget of 100 refused")
	}
	if _, ok := b.TryAcquire(31); ok {
		t.Fatal("31 bytes reserved with 30 free")
	}
	if got := testutil.ToFloat64(b.reserved); got != 70 {
		t.Fatalf("reserved %v, want 70 (a refused TryAcquire reserves nothing)", got)
	}
	waited := make(chan error, 1)
	go func() {
		r, err := b.Acquire(t.Context(), "c", 50)
		if err == nil {
			r()
		}
		waited <- err
	}()
	for queued := false; !queued; { // wait until the waiter is queued
		b.mu.Lock()
		queued = len(b.mu.ring) > 0
		b.mu.Unlock()
		runtime.Gosched()
	}
	if _, ok := b.TryAcquire(10); ok {
		t.Fatal("TryAcquire took 10 of the 30 free bytes ahead of a queued waiter")
	}
	first()
	if err := <-waited; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if got := testutil.ToFloat64(b.reserved); got != 0 {
		t.Fatalf("reserved %v after every release, want 0", got)
	}
}
