package memstore

import "testing"

func TestStore_UpdateAt(t *testing.T) {
	s := New(DefaultConfig())
	const now = 1_000
	plus := func(d int64) func(int64) int64 { return func(t int64) int64 { return max(t, now) + d } }

	// An absent key: rested in, stored only when f leaves it not rested.
	if !s.UpdateAt(s.Epoch(), "g", "rested", now, func(int64) int64 { return now }) || s.Has("g", "rested") {
		t.Fatal("an absent key updated to rested must stay absent")
	}
	if !s.UpdateAt(s.Epoch(), "g", "k", now, plus(50)) || s.Get("g", "k") != now+50 {
		t.Fatalf("absent key updated to now+50: got %d", s.Get("g", "k"))
	}
	// A held key takes f's TAT even when earlier.
	if !s.UpdateAt(s.Epoch(), "g", "k", now, func(int64) int64 { return now + 10 }) || s.Get("g", "k") != now+10 {
		t.Fatalf("held key updated to now+10: got %d", s.Get("g", "k"))
	}
	// After a drop, an absent key is refused; a held one is still updated.
	epoch := s.Epoch()
	s.DeleteFunc(func(k string) bool { return k == "gone" })
	if s.UpdateAt(epoch, "g", "gone", now, plus(50)) || s.Has("g", "gone") {
		t.Fatal("an absent key after a drop must be refused and stay absent")
	}
	if !s.UpdateAt(epoch, "g", "k", now, plus(1)) || s.Get("g", "k") != now+11 {
		t.Fatalf("held key after a drop: got %d", s.Get("g", "k"))
	}
}
