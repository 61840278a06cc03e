package ticket

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Kind says what a token holds.
type Kind uint8

// The kinds of token.
const (
	// Permit is the slots of an admitted request on its concurrency keys.
	Permit Kind = 1
	// Reservation is the charge of an admitted Reserve decision.
	Reservation Kind = 2
)

func (k Kind) String() string {
	switch k {
	case Permit:
		return "permit"
	case Reservation:
		return "reservation"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Bounds of a token. MaxKeys and MaxKeyBytes match the largest composite
// request the public API accepts; MaxBytes bounds the whole token.
const (
	MaxKeys     = 64
	MaxKeyBytes = 8 << 10
	MaxBytes    = 64 << 10
)

const version = 1

// ErrMalformed is wrapped by every error Decode and Encode return.
var ErrMalformed = errors.New("ticket: malformed token")

// Ticket is a token's content.
type Ticket struct {
	Kind  Kind
	Group string
	// Keys are the limit keys the token holds, in the request's order.
	Keys []string
	// ID is the permit's or reservation's id at the owner.
	ID [16]byte
}

// Encode returns t's token: version, kind, id, group and keys, each
// string length-prefixed. It refuses what Decode would refuse.
func Encode(t Ticket) ([]byte, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	n := 2 + len(t.ID) + binary.MaxVarintLen64*(2+len(t.Keys)) + len(t.Group)
	for _, k := range t.Keys {
		n += len(k)
	}
	b := make([]byte, 0, n)
	b = append(b, version, byte(t.Kind))
	b = append(b, t.ID[:]...)
	b = appendString(b, t.Group)
	b = binary.AppendUvarint(b, uint64(len(t.Keys)))
	for _, k := range t.Keys {
		b = appendString(b, k)
	}
	if len(b) > MaxBytes {
		return nil, fmt.Errorf("%w: %d bytes exceeds %d", ErrMalformed, len(b), MaxBytes)
	}
	return b, nil
}

// Decode parses a token. Any input that Encode did not produce, including
// trailing bytes, an unknown version or kind, a zero id, an empty group or
// key, or more keys than MaxKeys, is an error wrapping ErrMalformed.
func Decode(b []byte) (Ticket, error) {
	var t Ticket
	if len(b) > MaxBytes {
		return t, fmt.Errorf("%w: %d bytes exceeds %d", ErrMalformed, len(b), MaxBytes)
	}
	if len(b) < 2+len(t.ID) {
		return t, fmt.Errorf("%w: %d bytes is too short", ErrMalformed, len(b))
	}
	if b[0] != version {
		return t, fmt.Errorf("%w: unknown version %d", ErrMalformed, b[0])
	}
	t.Kind = Kind(b[1])
	copy(t.ID[:], b[2:])
	r := b[2+len(t.ID):]
	var err error
	if t.Group, r, err = readString(r, MaxKeyBytes); err != nil {
		return Ticket{}, fmt.Errorf("%w: group: %v", ErrMalformed, err)
	}
	n, w := binary.Uvarint(r)
	if w <= 0 || n == 0 || n > MaxKeys {
		return Ticket{}, fmt.Errorf("%w: key count", ErrMalformed)
	}
	r = r[w:]
	t.Keys = make([]string, n)
	for i := range t.Keys {
		if t.Keys[i], r, err = readString(r, MaxKeyBytes); err != nil {
			return Ticket{}, fmt.Errorf("%w: key %d: %v", ErrMalformed, i, err)
		}
	}
	if len(r) != 0 {
		return Ticket{}, fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(r))
	}
	if err := t.check(); err != nil {
		return Ticket{}, err
	}
	return t, nil
}

// Group returns the token's group without decoding its keys: what routes
// the token to its owner.
func Group(b []byte) (string, error) {
	if len(b) < 2+16 || b[0] != version {
		return "", fmt.Errorf("%w: no group", ErrMalformed)
	}
	g, _, err := readString(b[2+16:], MaxKeyBytes)
	if err != nil || g == "" {
		return "", fmt.Errorf("%w: group", ErrMalformed)
	}
	return g, nil
}

func (t Ticket) check() error {
	switch {
	case t.Kind != Permit && t.Kind != Reservation:
		return fmt.Errorf("%w: unknown kind %d", ErrMalformed, uint8(t.Kind))
	case t.ID == [16]byte{}:
		return fmt.Errorf("%w: zero id", ErrMalformed)
	case t.Group == "" || len(t.Group) > MaxKeyBytes:
		return fmt.Errorf("%w: group of %d bytes", ErrMalformed, len(t.Group))
	case len(t.Keys) == 0 || len(t.Keys) > MaxKeys:
		return fmt.Errorf("%w: %d keys (1 to %d)", ErrMalformed, len(t.Keys), MaxKeys)
	}
	for i, k := range t.Keys {
		if k == "" || len(k) > MaxKeyBytes {
			return fmt.Errorf("%w: key %d of %d bytes", ErrMalformed, i, len(k))
		}
	}
	return nil
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func readString(b []byte, max int) (string, []byte, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return "", nil, errors.New("bad length")
	}
	if n == 0 || n > uint64(max) || n > uint64(len(b)-w) {
		return "", nil, fmt.Errorf("length %d", n)
	}
	return string(b[w : w+int(n)]), b[w+int(n):], nil
}
