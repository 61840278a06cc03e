package server

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/grpclimit"
)

// The public server decodes its two request types by hand (decodeFor)
// instead of through protobuf-go, whose map decoding goes through
// reflection and costs about 15 allocations per DecideRequest. Here a
// request costs its descriptor map (two allocations for up to eight
// entries) and a share of a few slabs: descriptor names and values are cut
// from small shared string chunks (strArena), and a batch's requests and
// costs come from one slab.
//
// The decoders accept exactly what proto.Unmarshal accepts and leave the
// message as it would (FuzzDecode_DecideRequest and
// FuzzDecode_DecideBatchRequest compare them on arbitrary input):
// unknown fields (also a known field number with another wire type) are
// kept in the message's unknown fields with their tag re-encoded, unknown
// fields inside a map entry are dropped, the last key, value and cost
// win, a later entry with the same name replaces an earlier one, and a
// name or value that is not valid UTF-8 fails the whole message.

// errMalformed is every decoding failure; the codec answers it
// INVALID_ARGUMENT (grpclimit.Refusal).
var errMalformed = errors.New("server: malformed protobuf")

// decodeFor gives the codec the hand-written decoder of v's type, or nil
// for proto.Unmarshal.
func decodeFor(v any) grpclimit.Decoder {
	switch v.(type) {
	case *weirv1.DecideRequest:
		return decodeRequestMessage
	case *weirv1.DecideBatchRequest:
		return decodeBatchMessage
	}
	return nil
}

func decodeRequestMessage(wire []byte, m proto.Message) error {
	return decodeRequest(wire, m.(*weirv1.DecideRequest))
}

func decodeBatchMessage(wire []byte, m proto.Message) error {
	return decodeBatch(wire, m.(*weirv1.DecideBatchRequest))
}

// decodeRequest decodes wire into m as proto.Unmarshal would.
func decodeRequest(wire []byte, m *weirv1.DecideRequest) error {
	m.Reset()
	var a strArena
	a.reserve(stringBytes(wire))
	return a.request(wire, m, nil)
}

// decodeBatch decodes wire into m as proto.Unmarshal would. Its requests
// and their costs share one slab, and their strings a few chunks.
func decodeBatch(wire []byte, m *weirv1.DecideBatchRequest) error {
	m.Reset()
	n := 0
	_ = grpclimit.ScanFields(wire, func(num protowire.Number, typ protowire.Type, _ []byte) error {
		if num == 1 && typ == protowire.BytesType {
			n++
		}
		return nil
	})
	// The strings are fewer bytes than the message: it bounds the arena's
	// last chunk without a pass over every request's descriptors.
	var a strArena
	a.reserve(len(wire))
	var slots []requestSlot
	if n > 0 {
		slots = make([]requestSlot, n)
		m.Requests = make([]*weirv1.DecideRequest, 0, n)
	}
	var unknown []byte
	for b := wire; len(b) > 0; {
		num, typ, tl, err := consumeTag(b)
		if err != nil {
			return err
		}
		b = b[tl:]
		var vl int
		if num == 1 && typ == protowire.BytesType {
			var v []byte
			if v, vl = protowire.ConsumeBytes(b); vl < 0 {
				return fmt.Errorf("%w: truncated request", errMalformed)
			}
			var s *requestSlot
			if i := len(m.Requests); i < len(slots) {
				s = &slots[i]
			} else {
				s = new(requestSlot) // ScanFields counted fewer (it cannot)
			}
			if err := a.request(v, &s.req, &s.cost); err != nil {
				return fmt.Errorf("requests[%d]: %w", len(m.Requests), err)
			}
			m.Requests = append(m.Requests, &s.req)
		} else if unknown, vl, err = appendUnknown(unknown, num, typ, b); err != nil {
			return err
		}
		b = b[vl:]
	}
	if unknown != nil {
		m.ProtoReflect().SetUnknown(unknown)
	}
	return nil
}

// requestSlot holds one request of a batch and the storage of its cost.
type requestSlot struct {
	req  weirv1.DecideRequest
	cost int64
}

// request decodes the DecideRequest wire into m, a reset message. Its cost,
// when present, is stored in *cost (a new int64 when cost is nil).
func (a *strArena) request(wire []byte, m *weirv1.DecideRequest, cost *int64) error {
	var unknown []byte
	for b := wire; len(b) > 0; {
		num, typ, tl, err := consumeTag(b)
		if err != nil {
			return err
		}
		b = b[tl:]
		var vl int
		switch {
		case num == 1 && typ == protowire.BytesType:
			var entry []byte
			if entry, vl = protowire.ConsumeBytes(b); vl < 0 {
				return fmt.Errorf("%w: truncated descriptor", errMalformed)
			}
			if m.Descriptors == nil {
				m.Descriptors = make(map[string]string, countEntries(b))
			}
			if err := a.entry(entry, m.Descriptors); err != nil {
				return err
			}
		case num == 2 && typ == protowire.VarintType:
			var v uint64
			if v, vl = protowire.ConsumeVarint(b); vl < 0 {
				return fmt.Errorf("%w: malformed cost", errMalformed)
			}
			if m.Cost == nil {
				if cost == nil {
					cost = new(int64)
				}
				m.Cost = cost
			}
			*m.Cost = int64(v)
		case num == 3 && typ == protowire.VarintType:
			var v uint64
			if v, vl = protowire.ConsumeVarint(b); vl < 0 {
				return fmt.Errorf("%w: malformed reserve", errMalformed)
			}
			m.Reserve = v != 0
		default:
			if unknown, vl, err = appendUnknown(unknown, num, typ, b); err != nil {
				return err
			}
		}
		b = b[vl:]
	}
	if unknown != nil {
		m.ProtoReflect().SetUnknown(unknown)
	}
	return nil
}

// entry decodes one map entry (key = 1, value = 2, both strings; anything
// else skipped) into desc.
func (a *strArena) entry(b []byte, desc map[string]string) error {
	var key, val []byte
	for len(b) > 0 {
		num, typ, tl := protowire.ConsumeTag(b)
		if tl < 0 || num > protowire.MaxValidNumber {
			return fmt.Errorf("%w: malformed descriptor", errMalformed)
		}
		b = b[tl:]
		var vl int
		if (num == 1 || num == 2) && typ == protowire.BytesType {
			var v []byte
			if v, vl = protowire.ConsumeBytes(b); vl < 0 {
				return fmt.Errorf("%w: truncated descriptor", errMalformed)
			}
			if !utf8.Valid(v) {
				return fmt.Errorf("%w: descriptor %s is not valid UTF-8", errMalformed, entryPart(num))
			}
			if num == 1 {
				key = v
			} else {
				val = v
			}
		} else if vl = protowire.ConsumeFieldValue(num, typ, b); vl < 0 {
			return fmt.Errorf("%w: malformed descriptor", errMalformed)
		}
		b = b[vl:]
	}
	desc[a.str(key)] = a.str(val)
	return nil
}

func entryPart(num protowire.Number) string {
	if num == 1 {
		return "name"
	}
	return "value"
}

// consumeTag reads a field's tag as protobuf-go does: a field number
// outside 1..MaxValidNumber and an end-group tag (this message is not a
// group) are malformed.
func consumeTag(b []byte) (protowire.Number, protowire.Type, int, error) {
	tag, n := protowire.ConsumeVarint(b)
	if n < 0 {
		return 0, 0, 0, fmt.Errorf("%w: malformed tag", errMalformed)
	}
	num, typ := tag>>3, protowire.Type(tag&7)
	if num < uint64(protowire.MinValidNumber) || num > uint64(protowire.MaxValidNumber) || typ == protowire.EndGroupType {
		return 0, 0, 0, fmt.Errorf("%w: malformed tag", errMalformed)
	}
	return protowire.Number(num), typ, n, nil
}

// appendUnknown appends the field num of wire type typ whose value starts b
// to unknown as protobuf-go keeps an unknown field (its tag re-encoded, its
// value as it came) and returns the value's length.
func appendUnknown(unknown []byte, num protowire.Number, typ protowire.Type, b []byte) ([]byte, int, error) {
	n := protowire.ConsumeFieldValue(num, typ, b)
	if n < 0 {
		return unknown, 0, fmt.Errorf("%w: malformed field %d", errMalformed, num)
	}
	unknown = protowire.AppendTag(unknown, num, typ)
	return append(unknown, b[:n]...), n, nil
}

// countEntries is the number of descriptor entries (field 1, bytes) at the
// start of b and after it, a hint for the map's size. b starts at an
// entry's length.
func countEntries(b []byte) int {
	n := 0
	for len(b) > 0 {
		_, l := protowire.ConsumeBytes(b)
		if l < 0 {
			break
		}
		n++
		b = b[l:]
		num, typ, tl := protowire.ConsumeTag(b)
		if tl < 0 || num != 1 || typ != protowire.BytesType {
			break
		}
		b = b[tl:]
	}
	return n
}

// stringBytes bounds the bytes of the descriptor strings of the encoded
// DecideRequest b: the sum of its entries' lengths.
func stringBytes(b []byte) int {
	n := 0
	_ = grpclimit.ScanFields(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num == 1 && typ == protowire.BytesType {
			n += len(v)
		}
		return nil
	})
	return n
}

// strArena cuts strings from shared chunks, one allocation for many
// strings. A string cut from a chunk keeps the whole chunk reachable, and
// the node keeps some descriptor values for a while: policy.Match's
// GroupValue goes into the lease holder's record of a leased key
// (lease.Ref.Group, the latest request's) and the fallback-debt table. So
// chunks are small, at most arenaChunk bytes: a kept value holds at most
// that much, however large its message was; a longer string (over
// arenaChunk/4) gets its own allocation.
type strArena struct {
	b    strings.Builder
	left int // at most this many bytes of strings are still to come
}

// arenaChunk is the largest chunk a strArena allocates. 256 bytes hold the
// strings of about ten typical requests (a tenant and a user name: "tenant",
// "acme", "user", "u1"), so a batch pays a tenth of an allocation per
// request for its strings, and a kept group value holds at most 256 bytes
// (a lease holder's record of a key is about that size already).
const arenaChunk = 256

// reserve sizes the first chunk for about n bytes of strings.
func (a *strArena) reserve(n int) {
	a.left = n
	a.b.Grow(min(n, arenaChunk))
}

// str returns v as a string cut from the current chunk, starting a new
// chunk when it does not fit.
func (a *strArena) str(v []byte) string {
	switch {
	case len(v) == 0:
		return ""
	case len(v) > arenaChunk/4:
		return string(v)
	case a.b.Cap()-a.b.Len() < len(v):
		a.b = strings.Builder{}
		a.b.Grow(min(max(a.left, len(v)), arenaChunk))
	}
	a.left -= len(v)
	start := a.b.Len()
	a.b.Write(v)
	return a.b.String()[start:]
}
