package server

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

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/limiter"
)

// errTooLarge marks a request bigger than any valid one.
var errTooLarge = errors.New("server: request too large")

// codec is the standard proto codec, except for weir.v1 requests: those are
// checked against the API limits before decoding (scanRequest, scanBatch),
// and a refusal or decoding failure (garbage bytes, invalid UTF-8) is not
// returned to gRPC, which would answer INTERNAL, but recorded in the
// request for the service to answer with the right code (see refusal).
type codec struct{ base encoding.CodecV2 }

var _ encoding.CodecV2 = (*codec)(nil)

func newCodec() *codec { return &codec{base: encoding.GetCodecV2(grpcproto.Name)} }

func (c *codec) Name() string { return grpcproto.Name }

func (c *codec) Marshal(v any) (mem.BufferSlice, error) { return c.base.Marshal(v) }

func (c *codec) Unmarshal(data mem.BufferSlice, v any) error {
	var check func([]byte) error
	switch v.(type) {
	case *weirv1.DecideRequest:
		check = scanRequest
	case *weirv1.DecideBatchRequest:
		check = scanBatch
	default:
		return c.base.Unmarshal(data, v)
	}
	m := v.(proto.Message)
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	b := buf.ReadOnlyData()
	err := check(b)
	if err == nil {
		if uerr := proto.Unmarshal(b, m); uerr != nil {
			err = fmt.Errorf("%w: malformed request: %v", limiter.ErrInvalidRequest, uerr)
		}
	}
	if err != nil {
		markRefused(m, err)
	}
	return nil
}

// Field numbers (the largest protobuf allows, unused by the API) under
// which the codec records a refusal in a request's unknown fields. A
// client that sends them itself only gets its own request refused.
const (
	tooLargeField  protowire.Number = protowire.MaxValidNumber - 1
	malformedField protowire.Number = protowire.MaxValidNumber
)

func markRefused(m proto.Message, err error) {
	proto.Reset(m)
	field := malformedField
	if errors.Is(err, errTooLarge) {
		field = tooLargeField
	}
	raw := protowire.AppendTag(nil, field, protowire.BytesType)
	raw = protowire.AppendString(raw, err.Error())
	m.ProtoReflect().SetUnknown(raw)
}

// refusal returns the gRPC status for a request the codec refused, or nil.
func refusal(m proto.Message) error {
	raw := m.ProtoReflect().GetUnknown()
	for len(raw) > 0 {
		num, typ, n := protowire.ConsumeTag(raw)
		if n < 0 {
			return nil
		}
		raw = raw[n:]
		if typ == protowire.BytesType && (num == tooLargeField || num == malformedField) {
			msg, _ := protowire.ConsumeString(raw)
			if num == tooLargeField {
				return status.Error(codes.ResourceExhausted, msg)
			}
			return status.Error(codes.InvalidArgument, msg)
		}
		if n = protowire.ConsumeFieldValue(num, typ, raw); n < 0 {
			return nil
		}
		raw = raw[n:]
	}
	return nil
}
