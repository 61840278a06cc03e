package permit

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

func TestSet_MarshalBinary_roundTrip(t *testing.T) {
	var s Set
	l := Limit{MaxInFlight: 10, TTL: 30 * sec}
	mustAcquire(t, &s, 5*sec, l, 1, 3)
	mustAcquire(t, &s, 6*sec, l, 2, 1)
	if _, _, err := s.Renew(7*sec, id(1), 60*sec); err != nil {
		t.Fatal(err)
	}
	b, _ := s.MarshalBinary()
	var got Set
	if err := got.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if got.Latest() != 7*sec || got.InFlight() != 4 || !slices.Equal(got.Permits(7*sec), s.Permits(7*sec)) {
		t.Fatalf("decoded %+v from %x", got.Permits(7*sec), b)
	}
	again, _ := got.MarshalBinary()
	if !bytes.Equal(again, b) {
		t.Fatalf("re-encoding differs: %x vs %x", again, b)
	}
	var empty Set
	e, _ := empty.MarshalBinary()
	if err := got.UnmarshalBinary(e); err != nil || got.Len() != 0 || len(e) != 10 {
		t.Fatalf("empty set: %x, %v", e, err)
	}
}

// A full set at the largest costs and TTLs fits MaxEncodedLen.
func TestSet_MarshalBinary_fullSetWithinBound(t *testing.T) {
	var s Set
	l := Limit{MaxInFlight: MaxInFlight, TTL: MaxTTL}
	for n := range uint64(MaxInFlight) {
		if _, err := s.Acquire(MaxTime-MaxTTL+int64(n), l, seqID(n), 1); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := s.MarshalBinary()
	if len(b) > MaxEncodedLen {
		t.Fatalf("%d bytes, bound %d", len(b), MaxEncodedLen)
	}
	var got Set
	if err := got.UnmarshalBinary(b); err != nil || got.InFlight() != MaxInFlight {
		t.Fatalf("%v, %d slots", err, got.InFlight())
	}
}

func TestSet_UnmarshalBinary_badBytesLeaveSetUnchanged(t *testing.T) {
	var s Set
	mustAcquire(t, &s, sec, lim3, 1, 1)
	good, _ := s.MarshalBinary()
	entry := func(n byte, cost, delta byte) []byte { x := id(n); return append(x[:], cost, delta) }
	header := []byte{Version, 0, 0, 0, 0, 0, 0, 0, 100, 2}
	bad := map[string][]byte{
		"empty":           nil,
		"version":         append([]byte{2}, good[1:]...),
		"truncated":       good[:len(good)-1],
		"trailing":        append(slices.Clone(good), 0),
		"short header":    header[:5],
		"latest too late": {Version, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0},
		"overlong count":  append(slices.Clone(header[:9]), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
		"too many":        append(slices.Clone(header[:9]), 0x91, 0x4e), // 10,001
		"zero cost":       append(slices.Clone(header[:9]), append([]byte{1}, entry(1, 0, 5)...)...),
		"expired":         append(slices.Clone(header[:9]), append([]byte{1}, entry(1, 1, 0)...)...),
		"repeated id":     append(slices.Clone(header), append(entry(1, 1, 5), entry(1, 1, 5)...)...),
		"zero id":         append(slices.Clone(header[:9]), append([]byte{1}, make([]byte, 16)...)...),
		"beyond ttl":      append(slices.Clone(header[:9]), append([]byte{1}, append(entry(1, 1, 0xff)[:17], 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f)...)...),
		"too long":        make([]byte, MaxEncodedLen+1),
	}
	for name, b := range bad {
		if err := s.UnmarshalBinary(b); !errors.Is(err, ErrEncoding) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if now, _ := s.MarshalBinary(); !bytes.Equal(now, good) {
		t.Fatalf("bad input changed the set: %x → %x", good, now)
	}
}

func FuzzSet_UnmarshalBinary(f *testing.F) {
	var s Set
	mustAcquire(f, &s, sec, Limit{MaxInFlight: 5, TTL: sec}, 1, 2)
	mustAcquire(f, &s, 2*sec, Limit{MaxInFlight: 5, TTL: sec}, 2, 1)
	good, _ := s.MarshalBinary()
	f.Add(good)
	f.Add([]byte{Version, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{Version, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		var s Set
		if err := s.UnmarshalBinary(b); err != nil {
			if !errors.Is(err, ErrEncoding) || s.Len() != 0 {
				t.Fatalf("error %v, set %d", err, s.Len())
			}
			return
		}
		// Whatever decodes is a valid set: within bounds, re-encodes to
		// the same set, and keeps working.
		if s.InFlight() > MaxInFlight || s.Latest() > MaxTime {
			t.Fatalf("decoded out of bounds: %d slots, latest %d", s.InFlight(), s.Latest())
		}
		again, _ := s.MarshalBinary()
		var back Set
		if err := back.UnmarshalBinary(again); err != nil || back.Latest() != s.Latest() ||
			!slices.Equal(back.Permits(s.Latest()), s.Permits(s.Latest())) {
			t.Fatalf("re-encoding %x of %x decodes differently: %v", again, b, err)
		}
		for _, p := range s.Permits(s.Latest()) {
			if p.Expiry <= s.Latest() || p.Expiry-s.Latest() > MaxTTL || !s.Release(s.Latest(), p.ID) {
				t.Fatalf("bad permit %+v at %d", p, s.Latest())
			}
		}
		if s.InFlight() != 0 {
			t.Fatalf("%d slots after releasing every permit", s.InFlight())
		}
	})
}
