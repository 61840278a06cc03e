package server

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
)

// wire builds encoded messages for the tests below.
type wire []byte

func (w wire) bytes(num protowire.Number, v []byte) wire {
	return protowire.AppendBytes(protowire.AppendTag(w, num, protowire.BytesType), v)
}

func (w wire) varint(num protowire.Number, v uint64) wire {
	return protowire.AppendVarint(protowire.AppendTag(w, num, protowire.VarintType), v)
}

func (w wire) raw(b ...byte) wire { return append(w, b...) }

// entry is a descriptor map entry of name k and value v.
func entry(k, v string) []byte {
	return wire(nil).bytes(1, []byte(k)).bytes(2, []byte(v))
}

// sameAsProto decodes data as a DecideRequest with decodeRequest and with
// proto.Unmarshal and fails unless both refuse it or both give the same
// message: equal by proto.Equal, with the same unknown bytes and the same
// presence of the cost (an empty map and none are the same message). It
// returns the hand-decoded message.
func sameAsProto(t *testing.T, data []byte) *weirv1.DecideRequest {
	t.Helper()
	want, got := &weirv1.DecideRequest{}, &weirv1.DecideRequest{}
	werr, gerr := proto.Unmarshal(data, want), decodeRequest(data, got)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%x: proto.Unmarshal: %v; decodeRequest: %v", data, werr, gerr)
	}
	if werr != nil {
		if !errors.Is(gerr, errMalformed) {
			t.Fatalf("%x: decodeRequest failed with %v, not errMalformed", data, gerr)
		}
		return nil
	}
	sameRequest(t, data, want, got)
	return got
}

func sameRequest(t *testing.T, data []byte, want, got *weirv1.DecideRequest) {
	t.Helper()
	if !proto.Equal(want, got) ||
		!bytes.Equal(want.ProtoReflect().GetUnknown(), got.ProtoReflect().GetUnknown()) ||
		(want.Cost == nil) != (got.Cost == nil) {
		t.Fatalf("%x:\nproto.Unmarshal: %v (unknown %x)\ndecodeRequest:   %v (unknown %x)",
			data, want, want.ProtoReflect().GetUnknown(), got, got.ProtoReflect().GetUnknown())
	}
}

// sameBatchAsProto is sameAsProto for a DecideBatchRequest.
func sameBatchAsProto(t *testing.T, data []byte) *weirv1.DecideBatchRequest {
	t.Helper()
	want, got := &weirv1.DecideBatchRequest{}, &weirv1.DecideBatchRequest{}
	werr, gerr := proto.Unmarshal(data, want), decodeBatch(data, got)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%x: proto.Unmarshal: %v; decodeBatch: %v", data, werr, gerr)
	}
	if werr != nil {
		if !errors.Is(gerr, errMalformed) {
			t.Fatalf("%x: decodeBatch failed with %v, not errMalformed", data, gerr)
		}
		return nil
	}
	if !proto.Equal(want, got) || len(want.Requests) != len(got.Requests) ||
		!bytes.Equal(want.ProtoReflect().GetUnknown(), got.ProtoReflect().GetUnknown()) {
		t.Fatalf("%x:\nproto.Unmarshal: %v\ndecodeBatch:     %v", data, want, got)
	}
	for i := range want.Requests {
		sameRequest(t, data, want.Requests[i], got.Requests[i])
	}
	return got
}

// requestCases are encoded DecideRequests with what decoding must give.
// want nil: both decoders must refuse it.
var requestCases = map[string]struct {
	data []byte
	want *weirv1.DecideRequest
}{
	"empty": {nil, &weirv1.DecideRequest{}},
	"two descriptors and a cost": {
		wire(nil).bytes(1, entry("tenant", "acme")).bytes(1, entry("user", "u1")).varint(2, 3),
		&weirv1.DecideRequest{Descriptors: map[string]string{"tenant": "acme", "user": "u1"}, Cost: proto.Int64(3)},
	},
	"descriptors after the cost": {
		wire(nil).varint(2, 1).bytes(1, entry("tenant", "acme")),
		&weirv1.DecideRequest{Descriptors: map[string]string{"tenant": "acme"}, Cost: proto.Int64(1)},
	},
	"the last entry of a name wins": {
		wire(nil).bytes(1, entry("tenant", "a")).bytes(1, entry("user", "u")).bytes(1, entry("tenant", "b")),
		&weirv1.DecideRequest{Descriptors: map[string]string{"tenant": "b", "user": "u"}},
	},
	"the last key and value in an entry win": {
		wire(nil).bytes(1, wire(nil).bytes(1, []byte("x")).bytes(2, []byte("1")).bytes(1, []byte("tenant")).bytes(2, []byte("acme"))),
		&weirv1.DecideRequest{Descriptors: map[string]string{"tenant": "acme"}},
	},
	"an entry without key or value": {
		wire(nil).bytes(1, nil).bytes(1, wire(nil).bytes(2, []byte("v"))),
		&weirv1.DecideRequest{Descriptors: map[string]string{"": "v"}},
	},
	"the last cost wins, negative": {
		wire(nil).varint(2, 5).varint(2, ^uint64(0)),
		&weirv1.DecideRequest{Cost: proto.Int64(-1)},
	},
	"an explicit zero cost is present": {
		wire(nil).varint(2, 0),
		&weirv1.DecideRequest{Cost: proto.Int64(0)},
	},
	"unknown fields inside an entry are dropped": {
		wire(nil).bytes(1, wire(nil).varint(7, 1).bytes(1, []byte("k")).raw(0x1b, 0x08, 0x01, 0x1c).bytes(2, []byte("v")).varint(1, 4)),
		&weirv1.DecideRequest{Descriptors: map[string]string{"k": "v"}},
	},
	"reserve": {
		wire(nil).bytes(1, entry("tenant", "acme")).varint(3, 1),
		&weirv1.DecideRequest{Descriptors: map[string]string{"tenant": "acme"}, Reserve: true},
	},
	"reserve before the cost, any non-zero is true": {
		wire(nil).varint(3, 2).varint(2, 4),
		&weirv1.DecideRequest{Cost: proto.Int64(4), Reserve: true},
	},
	"the last reserve wins": {
		wire(nil).varint(3, 1).varint(3, 0),
		&weirv1.DecideRequest{},
	},
	"a 32-descriptor request": {
		many(32, 3),
		&weirv1.DecideRequest{Descriptors: manyMap(32, 3)},
	},
	"values over several chunks": {
		many(20, 50),
		&weirv1.DecideRequest{Descriptors: manyMap(20, 50)},
	},
	"values too long to share a chunk": {
		many(12, 300),
		&weirv1.DecideRequest{Descriptors: manyMap(12, 300)},
	},
	// Everything below decodes to unknown fields or fails; its wanted
	// message is proto.Unmarshal's, checked by sameAsProto only.
	"unknown field":                       {wire(nil).varint(3, 1).bytes(1, entry("a", "b")).bytes(9, []byte("x")), nil},
	"descriptors as a varint are unknown": {wire(nil).varint(1, 1), nil},
	"cost as bytes is unknown":            {wire(nil).bytes(2, []byte{1}), nil},
	"reserve as bytes is unknown":         {wire(nil).bytes(3, []byte{1}), nil},
	"a non-minimal reserve":               {wire(nil).raw(0x18, 0x81, 0x80, 0x00), nil},
	"a truncated reserve":                 {wire(nil).raw(0x18, 0x80), nil},
	"reserve as fixed32 is unknown":       {protowire.AppendFixed32(protowire.AppendTag(nil, 3, protowire.Fixed32Type), 1), nil},
	"cost as fixed64 is unknown":          {protowire.AppendFixed64(protowire.AppendTag(nil, 2, protowire.Fixed64Type), 7), nil},
	"an unknown group":                    {wire(nil).raw(0x2b, 0x08, 0x01, 0x2c).varint(2, 2), nil},
	"a non-minimal tag is re-encoded":     {wire(nil).raw(0x98, 0x00, 0x05), nil},
	"a non-minimal cost":                  {wire(nil).raw(0x10, 0x85, 0x80, 0x00), nil},
	"the largest field number":            {wire(nil).varint(protowire.MaxValidNumber, 1), nil},
	"field number 0":                      {wire(nil).raw(0x00, 0x01), nil},
	"a field number too large":            {protowire.AppendVarint(nil, uint64(protowire.MaxValidNumber+1)<<3), nil},
	"an end group at the top":             {wire(nil).raw(0x0c), nil},
	"wire type 6":                         {wire(nil).raw(0x0e, 0x01), nil},
	"truncated entry":                     {wire(nil).raw(0x0a, 0x05, 0x0a), nil},
	"truncated cost":                      {wire(nil).raw(0x10, 0x80), nil},
	"an overlong varint":                  {wire(nil).raw(0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02), nil},
	"invalid UTF-8 in a name":             {wire(nil).bytes(1, entry("\xff", "v")), nil},
	"invalid UTF-8 in a value":            {wire(nil).bytes(1, entry("k", "a\xc3")), nil},
	"invalid UTF-8 overwritten":           {wire(nil).bytes(1, wire(nil).bytes(1, []byte("\xff")).bytes(1, []byte("k"))), nil},
	"an end group in an entry":            {wire(nil).bytes(1, []byte{0x0c}), nil},
	"a field number too large in an entry": {
		wire(nil).bytes(1, protowire.AppendVarint(nil, uint64(protowire.MaxValidNumber+1)<<3)), nil,
	},
	"a bad wire type in an entry": {wire(nil).bytes(1, []byte{0x0f}), nil},
}

func many(n, size int) []byte {
	var w wire
	for i := range n {
		w = w.bytes(1, entry(strings.Repeat(string(rune('a'+i%26)), i/26+1), strings.Repeat("v", size)))
	}
	return w
}

func manyMap(n, size int) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[strings.Repeat(string(rune('a'+i%26)), i/26+1)] = strings.Repeat("v", size)
	}
	return m
}

func TestDecodeRequest_asProtoUnmarshal(t *testing.T) {
	for name, tc := range requestCases {
		t.Run(name, func(t *testing.T) {
			got := sameAsProto(t, tc.data)
			if tc.want != nil && (got == nil || !proto.Equal(got, tc.want)) {
				t.Fatalf("decoded %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDecodeBatch_asProtoUnmarshal(t *testing.T) {
	var all wire
	for name, tc := range requestCases {
		t.Run(name, func(t *testing.T) {
			b := wire(nil).bytes(1, tc.data).bytes(1, wire(nil).bytes(1, entry("tenant", "x"))).bytes(1, tc.data)
			got := sameBatchAsProto(t, b)
			if tc.want != nil && (got == nil || len(got.Requests) != 3 || !proto.Equal(got.Requests[2], tc.want)) {
				t.Fatalf("decoded %v, want %v as the third request", got, tc.want)
			}
		})
		if tc.want != nil {
			all = all.bytes(1, tc.data)
		}
	}
	for name, data := range map[string][]byte{
		"empty":                          nil,
		"every valid request":            all,
		"an unknown field between":       all.varint(2, 1).bytes(3, []byte("x")).bytes(1, nil),
		"requests as a varint":           wire(nil).varint(1, 1),
		"an empty request":               wire(nil).bytes(1, nil),
		"a truncated request":            wire(nil).raw(0x0a, 0x03, 0x10),
		"a malformed tag between":        all.raw(0x80),
		"an end group after requests":    all.raw(0x0c),
		"an unknown group after request": all.raw(0x1b, 0x1c),
	} {
		t.Run("batch "+name, func(t *testing.T) { sameBatchAsProto(t, data) })
	}
}

// TestDecodeRequest_stringsShareChunks checks what decoding is for: the
// descriptor strings of a request share one allocation, and a kept value
// holds at most arenaChunk bytes however large its request was.
func TestDecodeRequest_stringsShareChunks(t *testing.T) {
	data := wire(nil).bytes(1, entry("tenant", "acme")).bytes(1, entry("user", "u1"))
	allocs := testing.AllocsPerRun(100, func() {
		var m weirv1.DecideRequest
		if err := decodeRequest(data, &m); err != nil {
			t.Fatal(err)
		}
	})
	// The message itself, its map (a header and one group) and one chunk
	// for the four strings.
	if allocs > 4 {
		t.Fatalf("decoding a two-descriptor request allocates %v times, want at most 4", allocs)
	}

	var a strArena
	a.reserve(1 << 20)
	long := bytes.Repeat([]byte("x"), arenaChunk/4+1)
	for range 3 * arenaChunk / 10 {
		s := a.str([]byte("0123456789"))
		if a.b.Cap() > arenaChunk {
			t.Fatalf("a chunk of %d bytes, want at most %d (string %q)", a.b.Cap(), arenaChunk, s)
		}
	}
	if s := a.str(long); s != string(long) || a.b.Len() > arenaChunk {
		t.Fatalf("a long string went into the chunk (chunk length %d)", a.b.Len())
	}
}

// TestDecodeBatch_sharesSlabs checks that a batch of n requests costs about
// n maps and a few slabs, not n times a request's allocations.
func TestDecodeBatch_sharesSlabs(t *testing.T) {
	const n = 100
	var w wire
	for i := range n {
		w = w.bytes(1, wire(nil).bytes(1, entry("tenant", "t"+strings.Repeat("x", i%10))).bytes(1, entry("user", "u1")).varint(2, 2))
	}
	allocs := testing.AllocsPerRun(20, func() {
		var m weirv1.DecideBatchRequest
		if err := decodeBatch(w, &m); err != nil {
			t.Fatal(err)
		}
	})
	if max := 2*n + 10; allocs > float64(max) {
		t.Fatalf("decoding a batch of %d allocates %v times, want at most %d", n, allocs, max)
	}
	got := sameBatchAsProto(t, w)
	if !reflect.DeepEqual(got.Requests[7].Descriptors, map[string]string{"tenant": "txxxxxxx", "user": "u1"}) || got.Requests[7].GetCost() != 2 {
		t.Fatalf("request 7 decoded as %v", got.Requests[7])
	}
}

// FuzzDecode_DecideRequest compares decodeRequest with proto.Unmarshal on
// arbitrary bytes: both refuse the same inputs and give the same message
// for the rest.
func FuzzDecode_DecideRequest(f *testing.F) {
	for _, tc := range requestCases {
		f.Add(tc.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) { sameAsProto(t, data) })
}

// FuzzDecode_DecideBatchRequest is FuzzDecode_DecideRequest for batches.
func FuzzDecode_DecideBatchRequest(f *testing.F) {
	for _, tc := range requestCases {
		f.Add([]byte(wire(nil).bytes(1, tc.data).bytes(1, wire(nil).bytes(1, entry("a", "b")))))
	}
	f.Fuzz(func(t *testing.T, data []byte) { sameBatchAsProto(t, data) })
}
