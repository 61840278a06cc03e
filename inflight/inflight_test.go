package inflight

import (
	"context"
	"errors"
	"strings"
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
	release, err := b.Acquire(t.Context(), 60)
	if err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(b.reserved); got != 60 {
		t.Fatalf("reserved %v, want 60", got)
	}
	if _, err := b.Acquire(t.Context(), 41); !errors.Is(err, ErrFull) {
		t.Fatalf("41 bytes over a budget with 40 free: %v, want ErrFull", err)
	}
	if n := testutil.ToFloat64(b.refused); n != 1 {
		t.Fatalf("refused %v, want 1", n)
	}
	second, err := b.Acquire(t.Context(), 40)
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
	release, err := b.Acquire(t.Context(), 100)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		r, err := b.Acquire(t.Context(), 50)
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
	release, err := b.Acquire(t.Context(), 10)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if _, err := b.Acquire(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v, want the context's error", err)
	}
	if n := testutil.ToFloat64(b.refused); n != 0 {
		t.Fatalf("a caller's own deadline counted as a refusal (%v)", n)
	}
}

func TestBudget_Acquire_oversizedIsCutToTheBudget(t *testing.T) {
	b, _ := newBudget(t, 10, time.Millisecond)
	release, err := b.Acquire(t.Context(), 1<<40)
	if err != nil {
		t.Fatalf("a request larger than the whole budget must still go alone: %v", err)
	}
	release()
	if _, err := b.Acquire(t.Context(), 0); err == nil {
		t.Fatal("a zero reservation was accepted")
	}
}
