package grpclimit

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// ErrTooLarge marks a Check's refusal of a request bigger than any valid
// one: Refusal answers it RESOURCE_EXHAUSTED (any other refusal,
// INVALID_ARGUMENT).
var ErrTooLarge = errors.New("grpclimit: request too large")

// A Check inspects the wire form of one request before it is decoded, so
// that a forged request of millions of tiny entries is refused before it
// becomes millions of objects. It returns nil to let the request be
// decoded; it leaves malformed wire data for proto.Unmarshal to report
// (ScanFields stops at it quietly).
type Check func(wire []byte) error

// A Decoder decodes the wire form of a checked message into m in place of
// proto.Unmarshal, for a message type whose generic decoding costs too
// much. It must accept exactly what proto.Unmarshal accepts and leave m as
// proto.Unmarshal would (unknown fields kept, the last of repeated scalars
// winning, invalid UTF-8 refused); on an error m is reset and refused, as
// for proto.Unmarshal's. It must not keep wire, whose buffer is reused
// once it returns.
type Decoder func(wire []byte, m proto.Message) error

// Codec is gRPC's proto codec, except for the request types its checkFor
// function gives a Check: their wire form is checked first, then decoded
// (by their Decoder, if WithDecoders gives one), and a refusal or a
// decoding failure (garbage bytes, invalid UTF-8) is not returned to gRPC,
// which would answer INTERNAL, but recorded in the request for the service
// to answer with Refusal. Safe for concurrent use.
type Codec struct {
	base      encoding.CodecV2
	checkFor  func(v any) Check
	decodeFor func(v any) Decoder // nil: proto.Unmarshal for every message
}

var _ encoding.CodecV2 = (*Codec)(nil)

// NewCodec returns a Codec that checks each message v for which checkFor(v)
// is not nil (a proto.Message) and decodes every other as usual. Install
// it with grpc.ForceServerCodecV2.
func NewCodec(checkFor func(v any) Check) *Codec {
	return &Codec{base: encoding.GetCodecV2(grpcproto.Name), checkFor: checkFor}
}

// WithDecoders returns a copy of c that decodes each checked message v for
// which decodeFor(v) is not nil with that Decoder instead of
// proto.Unmarshal. c is not modified.
func (c *Codec) WithDecoders(decodeFor func(v any) Decoder) *Codec {
	d := *c
	d.decodeFor = decodeFor
	return &d
}

// Name is the proto codec's name.
func (c *Codec) Name() string { return grpcproto.Name }

// Marshal encodes v as the proto codec does.
func (c *Codec) Marshal(v any) (mem.BufferSlice, error) { return c.base.Marshal(v) }

// Unmarshal decodes data into v. It fails only where the proto codec would
// for messages without a Check; a checked message it refuses is reset and
// carries the refusal for Refusal.
func (c *Codec) Unmarshal(data mem.BufferSlice, v any) error {
	check := c.checkFor(v)
	if check == nil {
		return c.base.Unmarshal(data, v)
	}
	m := v.(proto.Message)
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	b := buf.ReadOnlyData()
	err := check(b)
	if err == nil {
		if uerr := c.decode(b, v, m); uerr != nil {
			err = fmt.Errorf("malformed request: %w", uerr)
		}
	}
	if err != nil {
		markRefused(m, err)
	}
	return nil
}

// decode decodes b into m (which is v) with v's Decoder, or proto.Unmarshal.
func (c *Codec) decode(b []byte, v any, m proto.Message) error {
	if c.decodeFor != nil {
		if d := c.decodeFor(v); d != nil {
			return d(b, m)
		}
	}
	return proto.Unmarshal(b, m)
}

// Field numbers (the largest protobuf allows, unused by weir's APIs) under
// which Codec records a refusal in a request's unknown fields. A client
// that sends them itself only gets its own request refused.
const (
	tooLargeField  protowire.Number = protowire.MaxValidNumber - 1
	malformedField protowire.Number = protowire.MaxValidNumber
)

func markRefused(m proto.Message, err error) {
	proto.Reset(m)
	field := malformedField
	if errors.Is(err, ErrTooLarge) {
		field = tooLargeField
	}
	raw := protowire.AppendTag(nil, field, protowire.BytesType)
	m.ProtoReflect().SetUnknown(protowire.AppendString(raw, err.Error()))
}

// Refusal returns the status for a request Codec refused
// (RESOURCE_EXHAUSTED or INVALID_ARGUMENT, with the refusal's message), or
// nil. A service calls it first in every checked method.
func Refusal(m proto.Message) error {
	found := errors.New("found")
	var st error
	ScanFields(m.ProtoReflect().GetUnknown(), func(num protowire.Number, typ protowire.Type, v []byte) error {
		if typ != protowire.BytesType || (num != tooLargeField && num != malformedField) {
			return nil
		}
		code := codes.InvalidArgument
		if num == tooLargeField {
			code = codes.ResourceExhausted
		}
		st = status.Error(code, string(v))
		return found
	})
	return st
}

// ScanFields calls f with the number, wire type and value of every field of
// the encoded message b, in order, without allocating; for a
// length-delimited field the value is its contents. It stops at f's first
// error, which it returns, or quietly at malformed data.
func ScanFields(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte) error) error {
	for len(b) > 0 {
		num, typ, tl := protowire.ConsumeTag(b)
		if tl < 0 {
			return nil
		}
		vl := protowire.ConsumeFieldValue(num, typ, b[tl:])
		if vl < 0 {
			return nil
		}
		v := b[tl : tl+vl]
		if typ == protowire.BytesType {
			v, _ = protowire.ConsumeBytes(v)
		}
		if err := f(num, typ, v); err != nil {
			return err
		}
		b = b[tl+vl:]
	}
	return nil
}
