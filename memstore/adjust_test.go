package memstore

import (
	"errors"
	"testing"
)

func TestStore_UpdateAt(t *testing.T) {
	s := New(Config{Shards: 1, MaxKeys: 1})
	epoch := s.Epoch()
	if err := s.UpdateAt(epoch, "g", "k", 0, func(tat int64, held bool) (int64, error) {
		if tat != 0 || held {
			t.Errorf("absent key passed as tat %d held %v", tat, held)
		}
		return 500, nil
	}); err != nil || s.Get("g", "k") != 500 {
		t.Fatalf("insert: %v, tat %d", err, s.Get("g", "k"))
	}
	if err := s.UpdateAt(epoch, "g", "k", 0, func(tat int64, _ bool) (int64, error) { return tat - 100, nil }); err != nil || s.Get("g", "k") != 400 {
		t.Fatalf("an earlier TAT must be stored: %v, tat %d", err, s.Get("g", "k"))
	}
	boom := errors.New("boom")
	if err := s.UpdateAt(epoch, "g", "k", 0, func(int64, bool) (int64, error) { return 1, boom }); !errors.Is(err, boom) || s.Get("g", "k") != 400 {
		t.Fatalf("f's error must store nothing: %v, tat %d", err, s.Get("g", "k"))
	}
	if err := s.UpdateAt(epoch, "g", "other", 0, func(int64, bool) (int64, error) { return 1, nil }); !errors.Is(err, ErrFull) {
		t.Fatalf("a new key over MaxKeys: %v, want ErrFull", err)
	}
	s.DeleteFunc(func(k string) bool { return k == "gone" })
	if err := s.UpdateAt(epoch, "g", "new", 0, func(int64, bool) (int64, error) { return 1, nil }); !errors.Is(err, ErrStaleEpoch) || s.Has("g", "new") {
		t.Fatalf("an absent key after a drop: %v, want ErrStaleEpoch and nothing stored", err)
	}
}
