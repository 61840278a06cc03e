package memstore

import (
	"errors"
	"testing"

	"github.com/weirhq/weir/gcra"
)

func TestStore_DecideAdjusted_decidesOnAdjustedTAT(t *testing.T) {
	s := New(DefaultConfig())
	lim := []gcra.Limit{{Interval: 10, Burst: 4}}
	out := make([]gcra.Result, 1)
	// The adjusted TAT leaves room for exactly one unit at now 100.
	floor := func(key string, tat int64) int64 { return max(tat, 100+3*10) }
	for i, want := range []bool{true, false} {
		agg, err := s.DecideAdjusted(t.Context(), s.Epoch(), "g", []string{"k"}, lim, 1, 100, out, floor)
		if err != nil || agg.Allowed != want {
			t.Fatalf("decision %d: %+v, %v; want allowed %v", i, agg, err, want)
		}
	}
	if got := s.Get("g", "k"); got != 140 {
		t.Fatalf("stored TAT %d, want 140 (the adjusted 130 plus one unit)", got)
	}
}

func TestStore_UpdateAt(t *testing.T) {
	s := New(Config{Shards: 1, MaxKeys: 1})
	epoch := s.Epoch()
	if err := s.UpdateAt(epoch, "g", "k", 0, func(tat int64, held bool) (int64, error) {
		if tat != 0 || held {
			t.Errorf("absent key read as %d, %v", tat, held)
		}
		return 500, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateAt(epoch, "g", "k", 0, func(tat int64, _ bool) (int64, error) { return tat - 100, nil }); err != nil || s.Get("g", "k") != 400 {
		t.Fatalf("lowering: %v, tat %d; want 400", err, s.Get("g", "k"))
	}
	boom := errors.New("boom")
	if err := s.UpdateAt(epoch, "g", "k", 0, func(int64, bool) (int64, error) { return 1, boom }); !errors.Is(err, boom) || s.Get("g", "k") != 400 {
		t.Fatalf("failing f: %v, tat %d; want boom and 400 kept", err, s.Get("g", "k"))
	}
	if err := s.UpdateAt(epoch, "g", "other", 0, func(int64, bool) (int64, error) { return 1, nil }); !errors.Is(err, ErrFull) {
		t.Fatalf("over MaxKeys: %v, want ErrFull", err)
	}
	s.DeleteFunc(func(string) bool { return false })
	if err := s.UpdateAt(epoch, "g", "new", 0, func(int64, bool) (int64, error) { return 1, nil }); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("stale epoch: %v, want ErrStaleEpoch", err)
	}
}
