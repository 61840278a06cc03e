package server

import (
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/limiter"
)

// The gRPC service answers DecideBatch with its responses already in wire
// form: appendBatchResponse writes the bytes proto.Marshal would write for
// &weirv1.DecideBatchResponse{Responses: ToProtoBatch(decs), RingEpoch:
// epoch}, straight from the decisions, in one pass (each nested message's
// length is written after it, see putLength), without building a message
// per decision and without protobuf-go's reflective size and marshal
// passes (together about a quarter of the node's CPU under batches of
// 100). The
// bytes travel as the answer's unknown fields, which every protobuf codec
// writes out verbatim, so the answer is the same on the wire whatever codec
// the server runs; in process, its Go fields are empty (see
// preEncodedBatch). TestEncode_matchesProtoMarshal and FuzzEncode_BatchResponse
// compare the bytes with proto.Marshal's.

// errInvalidUTF8 is what proto.Marshal refuses too: a string field that is
// not valid UTF-8. Decisions carry descriptor values the decoder checked
// and names from a validated policy, so it means a bug on this node.
var errInvalidUTF8 = errors.New("server: response string is not valid UTF-8")

// Field numbers of weir.v1's response messages (api/weir/v1/weir.proto).
const (
	fieldBatchResponses = 1
	fieldBatchEpoch     = 2

	fieldRespAllowed       = 1
	fieldRespRetryAfter    = 2
	fieldRespRemaining     = 3
	fieldRespResetAfter    = 4
	fieldRespLimits        = 5
	fieldRespMatched       = 6
	fieldRespTooCostly     = 7
	fieldRespFallback      = 8
	fieldRespPolicyVersion = 9
	fieldRespFromLease     = 10
	fieldRespPermit        = 21
	fieldRespReservation   = 22

	fieldLimitName       = 1
	fieldLimitKey        = 2
	fieldLimitAllowed    = 3
	fieldLimitRemaining  = 4
	fieldLimitRetryAfter = 5
	fieldLimitShadow     = 6
	fieldLimitBurst      = 7
	fieldLimitWindow     = 8
	fieldLimitResetAfter = 9
	fieldLimitTooCostly  = 10
	fieldLimitInFlight   = 11
	fieldLimitKind       = 12

	fieldFallbackMode   = 1
	fieldFallbackReason = 2

	fieldDurationSeconds = 1
	fieldDurationNanos   = 2
)

// preEncodedBatch returns the DecideBatch answer for decs, its responses
// and epoch pre-encoded in its unknown fields: on the wire it is exactly
// &weirv1.DecideBatchResponse{Responses: ToProtoBatch(decs), RingEpoch:
// epoch}. It fails only on a string that is not valid UTF-8, as
// proto.Marshal would.
func preEncodedBatch(decs []limiter.Decision, epoch uint64) (*weirv1.DecideBatchResponse, error) {
	wire, err := appendBatchResponse(nil, decs, epoch)
	if err != nil {
		return nil, err
	}
	out := new(weirv1.DecideBatchResponse)
	if len(wire) > 0 {
		out.ProtoReflect().SetUnknown(wire)
	}
	return out, nil
}

// appendBatchResponse appends the wire form of the DecideBatchResponse of
// decs and epoch to b.
func appendBatchResponse(b []byte, decs []limiter.Decision, epoch uint64) ([]byte, error) {
	start := len(b)
	if len(decs) > 0 {
		b = slices.Grow(b, firstResponseBytes)
	}
	var check utf8Check
	for i := range decs {
		d := &decs[i]
		if !check.valid(d) {
			return nil, fmt.Errorf("responses[%d]: %w", i, errInvalidUTF8)
		}
		b = protowire.AppendTag(b, fieldBatchResponses, protowire.BytesType)
		at := len(b)
		b = append(b, 0, 0) // room for the length of a typical response
		b = appendResponse(b, d)
		b = putLength(b, at, 2)
		if i == 0 && len(decs) > 1 {
			// Size the buffer once, from the first response: the others
			// are about as long (same limits, keys of similar length).
			b = slices.Grow(b, (len(b)-start)*(len(decs)-1)*9/8)
		}
	}
	if epoch != 0 {
		b = protowire.AppendTag(b, fieldBatchEpoch, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, epoch)
	}
	return b, nil
}

// firstResponseBytes is room for the first response of a batch, whose
// length then sizes the buffer for the others: a response of the built-in
// policy's two limits is about 165 bytes.
const firstResponseBytes = 256

// putLength writes the length of the message that follows the reserved
// bytes at b[at:at+reserved] into them as a varint, moving the message when
// its length takes another number of bytes, so a message is written once,
// without a sizing pass.
func putLength(b []byte, at, reserved int) []byte {
	n := len(b) - at - reserved
	need := protowire.SizeVarint(uint64(n))
	switch {
	case need > reserved:
		b = append(b, make([]byte, need-reserved)...)
		copy(b[at+need:], b[at+reserved:])
	case need < reserved:
		copy(b[at+need:], b[at+reserved:])
		b = b[:at+need+n]
	}
	protowire.AppendVarint(b[at:at], uint64(n))
	return b
}

// utf8Check checks the strings of a batch's decisions. The policy version,
// the limit names and their kinds are the same few strings in every
// decision of a batch, so it remembers those it found valid; keys differ from one
// decision to the next and are always checked.
type utf8Check struct {
	seen [8]string
	next int
}

// valid reports whether d's strings are all valid UTF-8.
func (c *utf8Check) valid(d *limiter.Decision) bool {
	ok := c.known(d.PolicyVersion)
	for i := range d.Limits {
		ok = ok && c.known(d.Limits[i].Name) && utf8.ValidString(d.Limits[i].Key) && c.known(d.Limits[i].Kind)
	}
	if f := d.Fallback; f != nil {
		ok = ok && utf8.ValidString(f.Mode) && utf8.ValidString(f.Reason)
	}
	return ok
}

// known reports whether s is valid UTF-8, remembering it when it is.
func (c *utf8Check) known(s string) bool {
	for _, v := range c.seen {
		if v == s {
			return true
		}
	}
	if !utf8.ValidString(s) {
		return false
	}
	c.seen[c.next%len(c.seen)] = s
	c.next++
	return true
}

// appendResponse appends the fields of the DecideResponse of d, in field
// order as proto.Marshal writes them. In a batch a response carries no
// ring epoch (field 20: the batch does), so the tokens follow from_lease.
func appendResponse(b []byte, d *limiter.Decision) []byte {
	b = appendBool(b, fieldRespAllowed, d.Allowed)
	b = appendDurationField(b, fieldRespRetryAfter, d.RetryAfter)
	b = appendInt64(b, fieldRespRemaining, d.Remaining)
	b = appendDurationField(b, fieldRespResetAfter, d.ResetAfter)
	for i := range d.Limits {
		b = protowire.AppendTag(b, fieldRespLimits, protowire.BytesType)
		at := len(b)
		b = append(b, 0) // room for the length of a typical limit status
		b = appendLimit(b, &d.Limits[i])
		b = putLength(b, at, 1)
	}
	b = appendBool(b, fieldRespMatched, d.Matched)
	b = appendBool(b, fieldRespTooCostly, d.TooCostly)
	if f := d.Fallback; f != nil {
		b = protowire.AppendTag(b, fieldRespFallback, protowire.BytesType)
		at := len(b)
		b = append(b, 0)
		b = appendString(b, fieldFallbackMode, f.Mode)
		b = appendString(b, fieldFallbackReason, f.Reason)
		b = putLength(b, at, 1)
	}
	b = appendString(b, fieldRespPolicyVersion, d.PolicyVersion)
	b = appendBool(b, fieldRespFromLease, d.FromLease)
	b = appendBytes(b, fieldRespPermit, d.Permit)
	return appendBytes(b, fieldRespReservation, d.Reservation)
}

func appendLimit(b []byte, l *limiter.LimitDecision) []byte {
	b = appendString(b, fieldLimitName, l.Name)
	b = appendString(b, fieldLimitKey, l.Key)
	b = appendBool(b, fieldLimitAllowed, l.Allowed)
	b = appendInt64(b, fieldLimitRemaining, l.Remaining)
	b = appendDurationField(b, fieldLimitRetryAfter, l.RetryAfter)
	b = appendBool(b, fieldLimitShadow, l.Shadow)
	b = appendInt64(b, fieldLimitBurst, l.Burst)
	b = appendDurationField(b, fieldLimitWindow, l.Window)
	b = appendDurationField(b, fieldLimitResetAfter, l.ResetAfter)
	b = appendBool(b, fieldLimitTooCostly, l.TooCostly)
	b = appendInt64(b, fieldLimitInFlight, l.InFlight)
	return appendString(b, fieldLimitKind, l.Kind)
}

// Scalars are proto3 fields without presence: a zero value is not written.

func appendBool(b []byte, num protowire.Number, v bool) []byte {
	if !v {
		return b
	}
	return append(protowire.AppendTag(b, num, protowire.VarintType), 1)
}

func sizeInt64(num protowire.Number, v int64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeVarint(uint64(v))
}

func appendInt64(b []byte, num protowire.Number, v int64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), uint64(v))
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

// A duration field is a google.protobuf.Duration message, absent for zero
// (ToProto leaves it unset), split as durationpb.New splits it: whole
// seconds, and nanoseconds of the same sign (int32, so a negative one is
// sign-extended to ten bytes).

func durationParts(d time.Duration) (secs, nanos int64) {
	return int64(d / time.Second), int64(int32(d % time.Second))
}

func sizeDuration(d time.Duration) int {
	secs, nanos := durationParts(d)
	return sizeInt64(fieldDurationSeconds, secs) + sizeInt64(fieldDurationNanos, nanos)
}

func appendDurationField(b []byte, num protowire.Number, d time.Duration) []byte {
	if d == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(sizeDuration(d)))
	secs, nanos := durationParts(d)
	b = appendInt64(b, fieldDurationSeconds, secs)
	return appendInt64(b, fieldDurationNanos, nanos)
}
