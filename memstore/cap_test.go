package memstore

import (
	"errors"
	"fmt"
	"testing"

	"github.com/weirhq/weir/gcra"
)

// ms is one millisecond on the store's time base (nanoseconds).
const ms = int64(1_000_000)

func decideOne(t *testing.T, s *Store, key string, now int64) error {
	t.Helper()
	out := make([]gcra.Result, 1)
	_, err := s.Decide(t.Context(), "g", []string{key}, []gcra.Limit{{Interval: ms, Burst: 1}}, 1, now, out)
	return err
}

// At the cap, rested keys make room; live keys are never evicted, and a
// new key is refused with ErrFull, changing nothing.
func TestStore_MaxKeys(t *testing.T) {
	s := New(Config{Shards: 1, MaxKeys: 3})
	for i := range 3 {
		if err := decideOne(t, s, fmt.Sprint("k", i), 0); err != nil {
			t.Fatal(err)
		}
	}
	// Every key is live until 1ms: a fourth is refused.
	if err := decideOne(t, s, "k3", ms/2); !errors.Is(err, ErrFull) {
		t.Fatalf("fourth key at 0.5ms: %v, want ErrFull", err)
	}
	if s.Len() != 3 || s.Has("g", "k3") || s.Refused() != 1 {
		t.Fatalf("len %d, has k3 %v, refused %d", s.Len(), s.Has("g", "k3"), s.Refused())
	}
	// A held key is still decided when full.
	if err := decideOne(t, s, "k0", 6*ms/10); err != nil {
		t.Fatalf("held key when full: %v", err)
	}
	// Within a millisecond of the last scan, the shard is not scanned again.
	if err := decideOne(t, s, "k3", 12*ms/10); !errors.Is(err, ErrFull) {
		t.Fatalf("rescan within 1ms: %v, want ErrFull", err)
	}
	// Later the keys have rested: they are evicted for the new one.
	if err := decideOne(t, s, "k3", 16*ms/10); err != nil {
		t.Fatalf("after the keys rested: %v", err)
	}
	if s.Len() != 1 || s.Evicted() != 3 {
		t.Fatalf("len %d evicted %d, want 1 and 3", s.Len(), s.Evicted())
	}
	// The count follows Sweep and DeleteFunc.
	for i := range 2 {
		if err := decideOne(t, s, fmt.Sprint("x", i), 16*ms/10); err != nil {
			t.Fatal(err)
		}
	}
	s.Sweep(5 * ms)
	s.Put("g", "p", 0)
	s.DeleteFunc(func(string) bool { return true })
	if got := s.keys.Load(); got != 0 {
		t.Fatalf("counted %d keys in an empty store", got)
	}
}

func TestStore_Room(t *testing.T) {
	s := New(Config{Shards: 1, MaxKeys: 2})
	s.Put("g", "a", 2*ms)
	s.Put("g", "b", ms/2)
	if s.Room("g", 1, ms/10) {
		t.Fatal("room for a third key while both are live")
	}
	if !s.Room("g", 1, 15*ms/10) || s.Has("g", "b") || !s.Has("g", "a") {
		t.Fatal("the rested key b was not evicted, or the live key a was")
	}
	if !New(DefaultConfig()).Room("g", 1<<20, 0) {
		t.Fatal("a store without a cap has no room")
	}
	if (Config{Shards: 1, MaxKeys: -1}).Validate() == nil {
		t.Fatal("negative MaxKeys passed Validate")
	}
}

// Past gcra.MaxTime a decision reads now as MaxTime, so a key limited there
// stays limited however late the clock reads: neither Sweep nor eviction
// for room may forget it and hand out a fresh burst (before, both compared
// its TAT with the raw now: 1/s burst 5 admitted 230 in 10s).
func TestStore_Sweep_pastMaxTimeKeepsLimitedKeys(t *testing.T) {
	for _, tc := range []struct {
		name   string
		forget func(s *Store, now int64)
	}{
		{"sweep", func(s *Store, now int64) { s.Sweep(now) }},
		{"eviction", func(s *Store, now int64) { _ = decideOne(t, s, fmt.Sprint("other", now), now) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Config{Shards: 1, MaxKeys: 2}) // k and one other
			lim := []gcra.Limit{{Interval: 1_000 * ms, Burst: 5}}
			out := make([]gcra.Result, 1)
			admitted := 0
			for i := range 10_000 { // 10s, a request per ms
				now := gcra.MaxTime + int64(i)*ms
				if i%100 == 0 {
					tc.forget(s, now)
				}
				res, err := s.Decide(t.Context(), "g", []string{"k"}, lim, 1, now, out)
				if err == nil && res.Allowed {
					admitted++
				}
			}
			if admitted != 5 {
				t.Fatalf("admitted %d in 10s past MaxTime, want the burst of 5 only (now clamped to MaxTime)", admitted)
			}
		})
	}
}
