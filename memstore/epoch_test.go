package memstore

import (
	"errors"
	"testing"

	"github.com/weirhq/weir/gcra"
)

// A decision that began before a hand-off dropped its key must not decide
// that key from nothing; one that began after may.
func TestStore_DecideAt_staleEpochRefusesAbsentKey(t *testing.T) {
	s := New(DefaultConfig())
	lim := []gcra.Limit{{Interval: 1000, Burst: 2}}
	keys := []string{"weir:{g}:k"}
	out := make([]gcra.Result, 1)
	s.Put("g", keys[0], 5_000) // spent: the TAT is ahead of now
	e := s.Epoch()
	if n := s.DeleteFunc(func(string) bool { return true }); n != 1 {
		t.Fatalf("DeleteFunc removed %d keys, want 1", n)
	}
	if _, err := s.DecideAt(ctx, e, "g", keys, lim, 1, 0, out); !errors.Is(err, ErrStaleEpoch) {
		t.Fatalf("stale decision on a dropped key: err %v, want ErrStaleEpoch", err)
	}
	if s.Has("g", keys[0]) {
		t.Fatal("a refused decision re-created the dropped key")
	}
	if agg, err := s.DecideAt(ctx, s.Epoch(), "g", keys, lim, 1, 0, out); err != nil || !agg.Allowed {
		t.Fatalf("current decision: %+v %v", agg, err)
	}
}

func TestStore_DecideAt_staleEpochStillDecidesHeldKeys(t *testing.T) {
	s := New(DefaultConfig())
	lim := []gcra.Limit{{Interval: 1000, Burst: 2}}
	out := make([]gcra.Result, 1)
	s.Put("g", "weir:{g}:k", 0)
	e := s.Epoch()
	s.DeleteFunc(func(k string) bool { return k != "weir:{g}:k" })
	if agg, err := s.DecideAt(ctx, e, "g", []string{"weir:{g}:k"}, lim, 1, 0, out); err != nil || !agg.Allowed {
		t.Fatalf("held key with a stale epoch: %+v %v", agg, err)
	}
}

func TestStore_PutAt_staleEpochStoresNothing(t *testing.T) {
	s := New(DefaultConfig())
	e := s.Epoch()
	s.DeleteFunc(func(string) bool { return true })
	if s.PutAt(e, "g", "weir:{g}:k", 7) {
		t.Fatal("PutAt with a stale epoch reported success")
	}
	if s.Has("g", "weir:{g}:k") {
		t.Fatal("PutAt with a stale epoch stored the key")
	}
	if !s.PutAt(s.Epoch(), "g", "weir:{g}:k", 7) || s.Get("g", "weir:{g}:k") != 7 {
		t.Fatal("PutAt with the current epoch did not store")
	}
}
