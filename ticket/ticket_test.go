package ticket

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func sample() Ticket {
	return Ticket{Kind: Permit, Group: "acme", Keys: []string{"weir:{acme}:exports:acme", "weir:{acme}:jobs:acme:x"}, ID: [16]byte{1, 2, 3}}
}

func TestEncode_roundTrip(t *testing.T) {
	for _, in := range []Ticket{sample(), {Kind: Reservation, Group: "g", Keys: []string{"k"}, ID: [16]byte{15: 9}}} {
		b, err := Encode(in)
		if err != nil {
			t.Fatal(err)
		}
		out, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if out.Kind != in.Kind || out.Group != in.Group || out.ID != in.ID || !slices.Equal(out.Keys, in.Keys) {
			t.Fatalf("Decode(Encode(%+v)) = %+v", in, out)
		}
		if g, err := Group(b); err != nil || g != in.Group {
			t.Fatalf("Group = %q, %v; want %q", g, err, in.Group)
		}
	}
}

func TestEncode_refusesWhatDecodeRefuses(t *testing.T) {
	for name, mut := range map[string]func(*Ticket){
		"kind":      func(t *Ticket) { t.Kind = 3 },
		"zero id":   func(t *Ticket) { t.ID = [16]byte{} },
		"no group":  func(t *Ticket) { t.Group = "" },
		"no keys":   func(t *Ticket) { t.Keys = nil },
		"empty key": func(t *Ticket) { t.Keys = []string{""} },
		"many keys": func(t *Ticket) { t.Keys = make([]string, MaxKeys+1) },
		"long key":  func(t *Ticket) { t.Keys = []string{strings.Repeat("k", MaxKeyBytes+1)} },
	} {
		tk := sample()
		mut(&tk)
		if _, err := Encode(tk); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: Encode err = %v, want ErrMalformed", name, err)
		}
	}
}

func TestDecode_refusesDamage(t *testing.T) {
	good, _ := Encode(sample())
	cases := map[string][]byte{
		"empty":    nil,
		"short":    good[:10],
		"version":  append([]byte{2}, good[1:]...),
		"trailing": append(slices.Clone(good), 0),
		"cut":      good[:len(good)-1],
	}
	for name, b := range cases {
		if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
	// Every truncation is refused, never a panic or a shorter ticket.
	for i := range len(good) {
		if _, err := Decode(good[:i]); err == nil {
			t.Fatalf("Decode of %d of %d bytes succeeded", i, len(good))
		}
	}
}

func FuzzDecode(f *testing.F) {
	good, _ := Encode(sample())
	f.Add(good)
	f.Add([]byte{1, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		tk, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		// Lengths may be overlong varints on input; the content must
		// survive a round trip through Encode unchanged.
		again, err := Encode(tk)
		if err != nil {
			t.Fatalf("decoded %+v does not re-encode: %v", tk, err)
		}
		back, err := Decode(again)
		if err != nil || back.Kind != tk.Kind || back.Group != tk.Group || back.ID != tk.ID || !slices.Equal(back.Keys, tk.Keys) {
			t.Fatalf("decoded %+v round-trips to %+v, %v", tk, back, err)
		}
		if len(again) > len(b) {
			t.Fatalf("re-encoding grew: %d > %d bytes", len(again), len(b))
		}
	})
}
