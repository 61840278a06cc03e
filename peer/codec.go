package peer

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

	peerv1 "github.com/weirhq/weir/api/weir/peer/v1"
)

// codec is the standard proto codec, except for a weir.peer.v1
// DecideRequest: its wire form is scanned first (at most MaxItems items, of
// at most DefaultMaxKeys keys and limits each), so that a forged request of
// millions of tiny entries is refused before it is decoded into millions of
// objects, and a refusal or a decoding failure (garbage bytes, invalid
// UTF-8) is not returned to gRPC, which would answer INTERNAL, but recorded
// in the request for Decide to answer INVALID_ARGUMENT (see refusal).
type codec struct{ base encoding.CodecV2 }

var _ encoding.CodecV2 = (*codec)(nil)

func newCodec() *codec { return &codec{base: encoding.GetCodecV2(grpcproto.Name)} }

func (c *codec) Name() string { return grpcproto.Name }

func (c *codec) Marshal(v any) (mem.BufferSlice, error) { return c.base.Marshal(v) }

func (c *codec) Unmarshal(data mem.BufferSlice, v any) error {
	req, ok := v.(*peerv1.DecideRequest)
	if !ok {
		return c.base.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	b := buf.ReadOnlyData()
	err := scanRequest(b)
	if err == nil {
		if uerr := proto.Unmarshal(b, req); uerr != nil {
			err = fmt.Errorf("malformed request: %w", uerr)
		}
	}
	if err != nil {
		proto.Reset(req)
		raw := protowire.AppendTag(nil, refusedField, protowire.BytesType)
		req.ProtoReflect().SetUnknown(protowire.AppendString(raw, "peer: "+err.Error()))
	}
	return nil
}

// refusedField is the field number (the largest protobuf allows, unused by
// the API) under which the codec records a refusal in the request's
// unknown fields. A sender that sets it itself only gets its own request
// refused.
const refusedField protowire.Number = protowire.MaxValidNumber

// refusal returns the INVALID_ARGUMENT status of a request the codec
// refused, or nil.
func refusal(req *peerv1.DecideRequest) error {
	raw := req.ProtoReflect().GetUnknown()
	for len(raw) > 0 {
		num, typ, n := protowire.ConsumeTag(raw)
		if n < 0 {
			return nil
		}
		raw = raw[n:]
		if num == refusedField && typ == protowire.BytesType {
			msg, _ := protowire.ConsumeString(raw)
			return status.Error(codes.InvalidArgument, msg)
		}
		if n = protowire.ConsumeFieldValue(num, typ, raw); n < 0 {
			return nil
		}
		raw = raw[n:]
	}
	return nil
}

// errTooMany is a request or item with more entries than any valid one.
var errTooMany = errors.New("too many entries")

// scanRequest counts a DecideRequest's items, and each item's keys and
// limits, on the wire without allocating. Malformed data is left for
// proto.Unmarshal to report.
func scanRequest(b []byte) error {
	items := 0
	return scanFields(b, func(num protowire.Number, v []byte) error {
		if num != 1 {
			return nil
		}
		if items++; items > MaxItems {
			return fmt.Errorf("%w: more than %d items", errTooMany, MaxItems)
		}
		keys, limits := 0, 0
		err := scanFields(v, func(num protowire.Number, _ []byte) error {
			switch num {
			case 2:
				keys++
			case 3:
				limits++
			}
			if keys > DefaultMaxKeys || limits > DefaultMaxKeys {
				return fmt.Errorf("%w: item %d has more than %d keys or limits", errTooMany, items-1, DefaultMaxKeys)
			}
			return nil
		})
		return err
	})
}

// scanFields calls f with the number and contents of every length-delimited
// field of the message b, stopping at f's first error or at malformed data.
func scanFields(b []byte, f func(protowire.Number, []byte) error) error {
	for len(b) > 0 {
		num, typ, tl := protowire.ConsumeTag(b)
		if tl < 0 {
			return nil
		}
		vl := protowire.ConsumeFieldValue(num, typ, b[tl:])
		if vl < 0 {
			return nil
		}
		if typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b[tl:])
			if err := f(num, v); err != nil {
				return err
			}
		}
		b = b[tl+vl:]
	}
	return nil
}
