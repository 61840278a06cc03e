package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
)

// The batch load (--batch > 1, without --route) encodes its DecideBatch
// requests and reads the answers by hand instead of through protobuf-go,
// whose reflective map encoding and message decoding cost the load
// generator most of its CPU (a DecideResponse of two limit statuses decodes
// into eight messages and two strings). A worker writes each request from
// the fixed descriptors, encoded once, and its keys into a buffer it
// reuses, and reads of each response only whether it was allowed, checking that every response is
// well-formed and that there is one per request. The echo server and a node
// are driven by the same code, so the ceiling and the node are measured
// alike. TestWireBatch_* compare both directions with protobuf-go.

// Field numbers of weir.v1 (api/weir/v1/weir.proto) the bench reads and
// writes.
const (
	wireRequests    = 1 // DecideBatchRequest.requests
	wireDescriptors = 1 // DecideRequest.descriptors (map entries)
	wireCost        = 2 // DecideRequest.cost
	wireEntryKey    = 1 // map entry key
	wireEntryValue  = 2 // map entry value
	wireResponses   = 1 // DecideBatchResponse.responses
	wireAllowed     = 1 // DecideResponse.allowed
)

// wireBatch is one worker's DecideBatch request in wire form and the
// answer's tally. Not safe for concurrent use: each worker has its own.
type wireBatch struct {
	conn    grpc.ClientConnInterface
	opts    []grpc.CallOption
	fixed   []byte // the fixed descriptors' map entries, encoded
	keyDesc string
	cost    int64
	req     wireRequest
	answer  wireAnswer
}

// wireRequest is the encoded DecideBatchRequest the codec sends as is.
type wireRequest struct{ b []byte }

// wireAnswer is what the codec reads from a DecideBatchResponse.
type wireAnswer struct{ responses, allowed int64 }

func newWireBatch(conn grpc.ClientConnInterface, cfg benchConfig) *wireBatch {
	w := &wireBatch{conn: conn, keyDesc: cfg.keyDesc, cost: cfg.cost}
	w.opts = []grpc.CallOption{grpc.ForceCodecV2(wireCodec{base: encoding.GetCodecV2(grpcproto.Name)})}
	for _, name := range slices.Sorted(maps.Keys(cfg.desc)) {
		if name != cfg.keyDesc {
			w.fixed = appendEntry(w.fixed, name, cfg.desc[name])
		}
	}
	return w
}

// encode writes the request of keys (one per item): each item the fixed
// descriptors, keyDesc set to its key, and the cost.
func (w *wireBatch) encode(keys []string) {
	b := w.req.b[:0]
	for _, key := range keys {
		entry := entrySize(w.keyDesc, key)
		size := len(w.fixed) + protowire.SizeTag(wireDescriptors) + protowire.SizeBytes(entry) +
			protowire.SizeTag(wireCost) + protowire.SizeVarint(uint64(w.cost))
		b = protowire.AppendTag(b, wireRequests, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(size))
		b = append(b, w.fixed...)
		b = appendEntry(b, w.keyDesc, key)
		b = protowire.AppendTag(b, wireCost, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(w.cost))
	}
	w.req.b = b
}

// call sends the encoded request and returns how many of its n requests
// were allowed and denied.
func (w *wireBatch) call(ctx context.Context, n int) (allowed, denied int64, err error) {
	w.answer = wireAnswer{}
	if err := w.conn.Invoke(ctx, weirv1.RateLimiter_DecideBatch_FullMethodName, &w.req, &w.answer, w.opts...); err != nil {
		// The transport may still hold the request's bytes: write the
		// next one elsewhere.
		w.req.b = nil
		return 0, 0, err
	}
	if w.answer.responses != int64(n) {
		return 0, 0, status.Errorf(codes.Internal, "%d responses for %d requests", w.answer.responses, n)
	}
	return w.answer.allowed, w.answer.responses - w.answer.allowed, nil
}

// appendEntry appends one descriptor (a map entry) as DecideRequest field 1.
func appendEntry(b []byte, name, value string) []byte {
	b = protowire.AppendTag(b, wireDescriptors, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(entrySize(name, value)))
	b = protowire.AppendTag(b, wireEntryKey, protowire.BytesType)
	b = protowire.AppendString(b, name)
	b = protowire.AppendTag(b, wireEntryValue, protowire.BytesType)
	return protowire.AppendString(b, value)
}

func entrySize(name, value string) int {
	return protowire.SizeTag(wireEntryKey) + protowire.SizeBytes(len(name)) +
		protowire.SizeTag(wireEntryValue) + protowire.SizeBytes(len(value))
}

// wireCodec sends a *wireRequest's bytes and reads into a *wireAnswer;
// every other message goes through gRPC's proto codec.
type wireCodec struct{ base encoding.CodecV2 }

func (wireCodec) Name() string { return grpcproto.Name }

func (c wireCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(*wireRequest); ok {
		return mem.BufferSlice{mem.SliceBuffer(r.b)}, nil
	}
	return c.base.Marshal(v)
}

func (c wireCodec) Unmarshal(data mem.BufferSlice, v any) error {
	a, ok := v.(*wireAnswer)
	if !ok {
		return c.base.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return a.read(buf.ReadOnlyData())
}

var errWireMalformed = errors.New("weir bench: malformed DecideBatchResponse")

// read counts the responses of the DecideBatchResponse b and the allowed
// ones (the last allowed field of a response wins, as in protobuf),
// skipping every other field, and refuses malformed wire data.
func (a *wireAnswer) read(b []byte) error {
	for len(b) > 0 {
		num, typ, v, n, err := consumeWireField(b)
		if err != nil {
			return err
		}
		if num == wireResponses && typ == protowire.BytesType {
			allowed, err := readAllowed(v)
			if err != nil {
				return fmt.Errorf("responses[%d]: %w", a.responses, err)
			}
			a.responses++
			if allowed {
				a.allowed++
			}
		}
		b = b[n:]
	}
	return nil
}

// readAllowed reads DecideResponse.allowed from the response b.
func readAllowed(b []byte) (bool, error) {
	allowed := false
	for len(b) > 0 {
		num, typ, v, n, err := consumeWireField(b)
		if err != nil {
			return false, err
		}
		if num == wireAllowed && typ == protowire.VarintType {
			x, _ := protowire.ConsumeVarint(v)
			allowed = x != 0
		}
		b = b[n:]
	}
	return allowed, nil
}

// consumeWireField reads the field at the start of b: its number, wire
// type, value (a length-delimited value without its length) and length in
// b, or an error for malformed data.
func consumeWireField(b []byte) (protowire.Number, protowire.Type, []byte, int, error) {
	num, typ, tl := protowire.ConsumeTag(b)
	if tl < 0 {
		return 0, 0, nil, 0, fmt.Errorf("%w: %v", errWireMalformed, protowire.ParseError(tl))
	}
	vl := protowire.ConsumeFieldValue(num, typ, b[tl:])
	if vl < 0 {
		return 0, 0, nil, 0, fmt.Errorf("%w: %v", errWireMalformed, protowire.ParseError(vl))
	}
	v := b[tl : tl+vl]
	if typ == protowire.BytesType {
		v, _ = protowire.ConsumeBytes(v)
	}
	return num, typ, v, tl + vl, nil
}

// sendWire is send for a worker with a wireBatch.
func (b *bench) sendWire(w *worker, at time.Time) {
	keys := w.keys[:b.cfg.batch]
	for i := range keys {
		keys[i] = b.key(w.rng)
	}
	w.wire.encode(keys)
	if at.IsZero() {
		at = time.Now()
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.timeout)
	defer cancel()
	allowed, denied, err := w.wire.call(ctx, len(keys))
	latency := time.Since(at)
	if at.Before(b.measureFrom) {
		return
	}
	w.tally.recordCounts(latency, allowed, denied, err)
}
