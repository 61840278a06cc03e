package grpclimit

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

type field struct {
	num protowire.Number
	typ protowire.Type
	v   string
}

func TestScanFields(t *testing.T) {
	var b []byte
	b = protowire.AppendVarint(protowire.AppendTag(b, 1, protowire.VarintType), 300)
	b = protowire.AppendString(protowire.AppendTag(b, 2, protowire.BytesType), "ab")
	b = protowire.AppendFixed32(protowire.AppendTag(b, 3, protowire.Fixed32Type), 7)
	var got []field
	err := ScanFields(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		got = append(got, field{num, typ, string(v)})
		return nil
	})
	want := []field{{1, protowire.VarintType, "\xac\x02"}, {2, protowire.BytesType, "ab"}, {3, protowire.Fixed32Type, "\x07\x00\x00\x00"}}
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ScanFields = %v, %v; want %v", got, err, want)
	}

	stop := errors.New("stop")
	n := 0
	if err := ScanFields(b, func(protowire.Number, protowire.Type, []byte) error { n++; return stop }); err != stop || n != 1 {
		t.Fatalf("stopping at the first field: %v after %d calls", err, n)
	}
	n = 0
	truncated := append(append([]byte{}, b...), protowire.AppendTag(nil, 4, protowire.BytesType)...)
	truncated = append(truncated, 10, 'x') // a length of 10, one byte present
	if err := ScanFields(truncated, func(protowire.Number, protowire.Type, []byte) error { n++; return nil }); err != nil || n != 3 {
		t.Fatalf("malformed tail: %v after %d fields, want nil after 3", err, n)
	}
}

// decode runs wire through a Codec that checks StringValue with check.
func decode(t *testing.T, check Check, wire []byte) (*wrapperspb.StringValue, error) {
	t.Helper()
	c := NewCodec(func(v any) Check {
		if _, ok := v.(*wrapperspb.StringValue); ok {
			return check
		}
		return nil
	})
	m := &wrapperspb.StringValue{}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, m); err != nil {
		t.Fatalf("the codec failed instead of recording a refusal: %v", err)
	}
	return m, Refusal(m)
}

func TestCodec_refusals(t *testing.T) {
	valid, err := proto.Marshal(wrapperspb.String("ok"))
	if err != nil {
		t.Fatal(err)
	}
	pass := func([]byte) error { return nil }
	for name, tc := range map[string]struct {
		check Check
		wire  []byte
		code  codes.Code
		msg   string
	}{
		"passes":        {pass, valid, codes.OK, ""},
		"too large":     {func([]byte) error { return fmt.Errorf("%w: 9 bytes", ErrTooLarge) }, valid, codes.ResourceExhausted, "9 bytes"},
		"refused":       {func([]byte) error { return errors.New("too many") }, valid, codes.InvalidArgument, "too many"},
		"garbage":       {pass, []byte{0xff, 0xff, 0xff, 0xff, 0x0f}, codes.InvalidArgument, "malformed request"},
		"invalid UTF-8": {pass, protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "\xff"), codes.InvalidArgument, "malformed request"},
		"forged marker": {pass, protowire.AppendString(protowire.AppendTag(nil, protowire.MaxValidNumber-1, protowire.BytesType), "x"), codes.ResourceExhausted, "x"},
	} {
		t.Run(name, func(t *testing.T) {
			m, err := decode(t, tc.check, tc.wire)
			if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.msg) {
				t.Fatalf("Refusal = %v, want %v containing %q", err, tc.code, tc.msg)
			}
			if tc.code != codes.OK && m.GetValue() != "" {
				t.Fatalf("a refused request kept its value %q", m.GetValue())
			}
			if tc.code == codes.OK && m.GetValue() != "ok" {
				t.Fatalf("decoded %q, want ok", m.GetValue())
			}
		})
	}
}

func TestCodec_uncheckedMessagesDecodeAsUsual(t *testing.T) {
	c := NewCodec(func(any) Check { return nil })
	m := &wrapperspb.StringValue{}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})}, m); err == nil {
		t.Fatal("garbage in an unchecked message decoded without error")
	}
	b, err := c.Marshal(wrapperspb.String("x"))
	if err != nil || c.Name() != "proto" {
		t.Fatalf("Marshal: %v; Name %q", err, c.Name())
	}
	b.Free()
}

func TestCodec_WithDecoders(t *testing.T) {
	valid, err := proto.Marshal(wrapperspb.String("ok"))
	if err != nil {
		t.Fatal(err)
	}
	var decoded []string
	upper := func(wire []byte, m proto.Message) error {
		decoded = append(decoded, string(wire))
		if len(wire) == 0 {
			return errors.New("empty")
		}
		m.(*wrapperspb.StringValue).Value = "OK"
		return nil
	}
	pass := func([]byte) error { return nil }
	base := NewCodec(func(v any) Check {
		if _, ok := v.(*wrapperspb.StringValue); ok {
			return pass
		}
		return nil
	})
	c := base.WithDecoders(func(v any) Decoder {
		if _, ok := v.(*wrapperspb.StringValue); ok {
			return upper
		}
		return nil
	})
	unmarshal := func(c *Codec, wire []byte) (*wrapperspb.StringValue, error) {
		m := &wrapperspb.StringValue{}
		if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, m); err != nil {
			t.Fatalf("the codec failed instead of recording a refusal: %v", err)
		}
		return m, Refusal(m)
	}
	if m, err := unmarshal(c, valid); err != nil || m.GetValue() != "OK" || len(decoded) != 1 {
		t.Fatalf("with the decoder: %q, %v after %d decodes; want OK by the decoder", m.GetValue(), err, len(decoded))
	}
	if m, err := unmarshal(c, nil); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "empty") || m.GetValue() != "" {
		t.Fatalf("a decoder's error: %q, %v; want INVALID_ARGUMENT naming it", m.GetValue(), err)
	}
	if m, err := unmarshal(base, valid); err != nil || m.GetValue() != "ok" || len(decoded) != 2 {
		t.Fatalf("the codec WithDecoders copied was changed: %q, %v", m.GetValue(), err)
	}
	b := &wrapperspb.BytesValue{}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{0x0a, 0x01, 'x'})}, b); err != nil || string(b.GetValue()) != "x" || len(decoded) != 2 {
		t.Fatalf("an unchecked message: %q, %v; want proto.Unmarshal's x", b.GetValue(), err)
	}
}
