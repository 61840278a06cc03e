package permit

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Version is the first byte of an encoded Set.
const Version byte = 1

// MaxEncodedLen bounds an encoding: the version, the latest time (8
// bytes), the count, and per permit its id, its cost (2 bytes up to MaxInFlight) and
// its expiry as a delta (7 bytes up to MaxTTL). UnmarshalBinary refuses
// longer input before reading it.
const MaxEncodedLen = 1 + 8 + 2 + MaxInFlight*(len(ID{})+2+7)

// ErrEncoding is returned by UnmarshalBinary for bytes that are not a Set
// this version wrote.
var ErrEncoding = errors.New("permit: bad encoding")

// MarshalBinary encodes the permits live as of the latest call, for Redis
// persistence and ownership hand-off:
//
//	version (1 byte) | latest (8 bytes big-endian, ns) | count (uvarint)
//	count × ( id (16 bytes) | cost (uvarint) | expiry − previous expiry (uvarint) )
//
// Permits go earliest expiry first, the first delta taken from latest, so
// expiries cost a few bytes each. latest is fixed-width big-endian so that
// a store can tell the later of two encodings of one key from bytes 2 to 9
// alone (a Redis script reads them as two 32-bit halves with struct.unpack,
// exact in Lua's doubles, and keeps the later set as it keeps the later
// TAT). A Set already holds only what fits, so
// the result is at most MaxEncodedLen bytes. It never fails.
func (s *Set) MarshalBinary() ([]byte, error) {
	live := s.heap.sorted()
	out := make([]byte, 0, 1+8+binary.MaxVarintLen64+len(live)*(len(ID{})+2+7))
	out = append(out, Version)
	out = binary.BigEndian.AppendUint64(out, uint64(s.latest))
	n := 0
	for _, e := range live {
		if e.expiry > s.latest {
			n++
		}
	}
	out = binary.AppendUvarint(out, uint64(n))
	prev := s.latest
	for _, e := range live {
		if e.expiry <= s.latest {
			continue // expired, not yet dropped: not part of the state
		}
		out = append(out, e.id[:]...)
		out = binary.AppendUvarint(out, uint64(e.cost))
		out = binary.AppendUvarint(out, uint64(e.expiry-prev))
		prev = e.expiry
	}
	return out, nil
}

// UnmarshalBinary replaces s with the Set b encodes. Bytes that are not
// one (a wrong version, truncated or trailing bytes, more than
// MaxInFlight slots, an expiry outside (latest, latest+MaxTTL], a zero or
// repeated id) are ErrEncoding and leave s unchanged.
func (s *Set) UnmarshalBinary(b []byte) error {
	got, err := decode(b)
	if err != nil {
		return err
	}
	*s = *got
	return nil
}

func decode(b []byte) (*Set, error) {
	if len(b) > MaxEncodedLen {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrEncoding, len(b), MaxEncodedLen)
	}
	if len(b) == 0 || b[0] != Version {
		return nil, fmt.Errorf("%w: not version %d", ErrEncoding, Version)
	}
	if len(b) < 1+8 {
		return nil, fmt.Errorf("%w: %d bytes, no header", ErrEncoding, len(b))
	}
	r := reader{b: b[1+8:]}
	latest, n := binary.BigEndian.Uint64(b[1:]), r.uvarint()
	if r.err != nil || latest > uint64(MaxTime) || n > MaxInFlight {
		return nil, fmt.Errorf("%w: header (latest %d, %d permits)", ErrEncoding, latest, n)
	}
	s := &Set{latest: int64(latest)}
	prev := s.latest
	for i := range n {
		e, err := r.entry(prev, s.latest+MaxTTL-prev)
		switch {
		case err != nil:
		case e.expiry <= s.latest:
			err = errors.New("expired at latest")
		case s.used+e.cost > MaxInFlight:
			err = fmt.Errorf("more than %d slots", MaxInFlight)
		case s.byID[e.id] != nil:
			err = errors.New("repeated id")
		}
		if err != nil {
			return nil, fmt.Errorf("%w: permit %d: %v", ErrEncoding, i, err)
		}
		s.add(e)
		prev = e.expiry
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrEncoding, len(r.b))
	}
	return s, nil
}

// reader consumes b and keeps the first error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errors.New("truncated or overlong varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// entry reads one permit whose expiry follows prev by at most maxDelta
// (so that it stays within MaxTTL of latest and never overflows).
func (r *reader) entry(prev, maxDelta int64) (*entry, error) {
	e := &entry{}
	if len(r.b) < len(e.id) {
		return nil, errors.New("truncated id")
	}
	copy(e.id[:], r.b)
	r.b = r.b[len(e.id):]
	cost, delta := r.uvarint(), r.uvarint()
	switch {
	case r.err != nil:
		return nil, r.err
	case e.id == ID{}:
		return nil, errors.New("zero id")
	case cost == 0 || cost > MaxInFlight:
		return nil, fmt.Errorf("cost %d outside 1..%d", cost, MaxInFlight)
	case delta > uint64(maxDelta):
		return nil, fmt.Errorf("expiry more than %dns after latest", MaxTTL)
	}
	e.cost, e.expiry = int64(cost), prev+int64(delta)
	return e, nil
}
