package chaos

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestLoop_healReturnsStepErrorAndUndoes(t *testing.T) {
	var steps, undos atomic.Int32
	third := make(chan struct{})
	errStep := errors.New("step 1 failed")
	heal := loop(t.Context(), time.Millisecond, func(ctx context.Context, i int) error {
		if steps.Add(1) == 3 {
			close(third)
		}
		if i == 1 {
			return errStep
		}
		return nil
	}, func() error {
		undos.Add(1)
		return nil
	})
	select {
	case <-third:
	case <-time.After(10 * time.Second):
		t.Fatal("the loop did not step three times in 10s")
	}
	err := heal(t.Context())
	if !errors.Is(err, errStep) {
		t.Fatalf("heal = %v, want the first step's error", err)
	}
	if undos.Load() != 1 {
		t.Fatalf("undo ran %d times, want once", undos.Load())
	}
}

func TestBoth_healsInReverseOrder(t *testing.T) {
	var order []string
	mk := func(name string, fail bool) injectFunc {
		return func(context.Context, *testbed, []*Node) (func(context.Context) error, error) {
			order = append(order, "start "+name)
			var err error
			if fail {
				err = errors.New(name + " failed")
			}
			return func(context.Context) error { order = append(order, "heal "+name); return nil }, err
		}
	}
	heal, err := both(mk("a", false), mk("b", false))(t.Context(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := heal(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := order; len(got) != 4 || got[2] != "heal b" || got[3] != "heal a" {
		t.Fatalf("order %q, want a and b started, then healed b first", got)
	}
	// When the second fails to start, the first is still healed.
	order = nil
	heal, err = both(mk("a", false), mk("b", true))(t.Context(), nil, nil)
	if err == nil {
		t.Fatal("both hid b's failure")
	}
	heal(t.Context())
	if len(order) != 4 || order[3] != "heal a" {
		t.Fatalf("order %q, want a healed after b failed", order)
	}
}
