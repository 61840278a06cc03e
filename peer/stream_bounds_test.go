package peer

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	peerv1 "github.com/weirhq/weir/api/weir/peer/v1"
	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/grpclimit/grpclimittest"
)

var decideStreamDesc = &grpc.StreamDesc{StreamName: "DecideStream", ServerStreams: true, ClientStreams: true}

// openRawStream opens a DecideStream on conn (a grpclimittest.DialRaw
// connection), ended when the test ends.
func openRawStream(t *testing.T, conn *grpc.ClientConn) grpc.ClientStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	st, err := conn.NewStream(ctx, decideStreamDesc, peerv1.Peer_DecideStream_FullMethodName)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// sendRaw sends raw as one DecideBatch on a new stream and returns the
// stream's first answer or its end.
func sendRaw(t *testing.T, conn *grpc.ClientConn, raw []byte) (*peerv1.DecideBatchResult, error) {
	t.Helper()
	st := openRawStream(t, conn)
	if err := st.SendMsg(&raw); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err) // io.EOF: the stream has ended, RecvMsg says how
	}
	var out peerv1.DecideBatchResult
	return &out, st.RecvMsg(&out)
}

// A stream batch is held to the bounds of a Decide request, with the
// same codes, and to MaxStreamBatchBytes; a refused batch ends its stream
// and reaches no handler.
func TestServer_DecideStream_refusesMalformedAndOversized(t *testing.T) {
	h := &fakeHandler{}
	conn := grpclimittest.DialRaw(t, startBoundedServer(t, h))
	field := func(num protowire.Number, b []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), b)
	}
	repeat := func(n int, b []byte) (out []byte) {
		for range n {
			out = append(out, b...)
		}
		return out
	}
	for name, tc := range map[string]struct {
		raw  []byte
		code codes.Code
	}{
		"garbage":                  {[]byte{0xff, 0xff, 0xff, 0xff, 0x0f}, codes.InvalidArgument},
		"truncated":                {field(1, field(2, []byte("weir:{a}:k")))[:5], codes.InvalidArgument},
		"invalid UTF-8 key":        {field(1, field(2, []byte("weir:{a}:\xff"))), codes.InvalidArgument},
		"invalid UTF-8 sender":     {field(2, []byte("\xc3")), codes.InvalidArgument},
		"too many items":           {repeat(MaxItems+1, field(1, nil)), codes.InvalidArgument},
		"too many keys":            {field(1, repeat(DefaultMaxKeys+1, field(2, nil))), codes.InvalidArgument},
		"too many limits":          {field(1, repeat(DefaultMaxKeys+1, field(3, nil))), codes.InvalidArgument},
		"over MaxStreamBatchBytes": {field(2, make([]byte, MaxStreamBatchBytes)), codes.ResourceExhausted},
		"over MaxRequestBytes":     {field(2, make([]byte, MaxRequestBytes)), codes.ResourceExhausted},
		"forged refusal marker":    {protowire.AppendString(protowire.AppendTag(nil, protowire.MaxValidNumber, protowire.BytesType), "x"), codes.InvalidArgument},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := sendRaw(t, conn, tc.raw); status.Code(err) != tc.code {
				t.Fatalf("err = %v, want %v", err, tc.code)
			}
		})
	}
	if n := len(h.batchSizes()); n != 0 {
		t.Fatalf("%d refused batches reached the handler", n)
	}
	ok, err := proto.Marshal(&peerv1.DecideBatch{Id: 9, FromNode: "n1", Items: []*peerv1.Item{itemToProto(item(1))}})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := sendRaw(t, conn, ok); err != nil || r.GetId() != 9 || len(r.GetResults()) != 1 {
		t.Fatalf("valid batch: %v, %v", r, err)
	}
}

// One connection holds at most MaxStreamsPerConn decide streams; the next
// is refused RESOURCE_EXHAUSTED, and a slot frees when one ends.
func TestServer_DecideStream_streamsPerConnection(t *testing.T) {
	conn := grpclimittest.DialRaw(t, startBoundedServer(t, &fakeHandler{}))
	batch := func(id uint64) []byte {
		b, err := proto.Marshal(&peerv1.DecideBatch{Id: id, Items: []*peerv1.Item{itemToProto(item(1))}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	exchange := func(st grpc.ClientStream, id uint64) error {
		raw := batch(id)
		if err := st.SendMsg(&raw); err != nil && !errors.Is(err, io.EOF) {
			return err // io.EOF: the stream has ended, RecvMsg says how
		}
		var out peerv1.DecideBatchResult
		if err := st.RecvMsg(&out); err != nil {
			return err
		}
		if out.GetId() != id {
			t.Fatalf("answer for batch %d, want %d", out.GetId(), id)
		}
		return nil
	}
	var open []grpc.ClientStream
	for i := range MaxStreamsPerConn {
		st := openRawStream(t, conn)
		if err := exchange(st, uint64(i+1)); err != nil { // the server holds it now
			t.Fatalf("stream %d: %v", i, err)
		}
		open = append(open, st)
	}
	if err := exchange(openRawStream(t, conn), 99); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("stream %d: %v, want RESOURCE_EXHAUSTED", MaxStreamsPerConn+1, err)
	}
	if err := open[0].CloseSend(); err != nil {
		t.Fatal(err)
	}
	var out peerv1.DecideBatchResult
	if err := open[0].RecvMsg(&out); err == nil {
		t.Fatal("a stream closed for sending answered again")
	}
	if err := exchange(openRawStream(t, conn), 100); err != nil {
		t.Fatalf("a stream after one ended: %v", err)
	}
}

// Answers carry their batch's id and may come back in any order: a batch
// answered first is not held behind an earlier one.
func TestServer_DecideStream_answersOutOfOrder(t *testing.T) {
	gate, release := newGate(t)
	entered := make(chan struct{}, 1)
	conn := grpclimittest.DialRaw(t, startBoundedServer(t, &blockingHandler{stuck: 666, gate: gate, entered: entered}))
	st := openRawStream(t, conn)
	for _, b := range []*peerv1.DecideBatch{
		{Id: 1, Items: []*peerv1.Item{itemToProto(item(666))}},
		{Id: 2, Items: []*peerv1.Item{itemToProto(item(2))}},
	} {
		raw, err := proto.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SendMsg(&raw); err != nil {
			t.Fatal(err)
		}
	}
	<-entered
	var out peerv1.DecideBatchResult
	if err := st.RecvMsg(&out); err != nil || out.GetId() != 2 {
		t.Fatalf("first answer: batch %d, %v; want batch 2", out.GetId(), err)
	}
	release()
	if err := st.RecvMsg(&out); err != nil || out.GetId() != 1 || out.GetResults()[0].GetOverall().GetTatNs() != 666 {
		t.Fatalf("second answer: %v, %v; want batch 1", &out, err)
	}
}

// tokenHandler lets one call through per token, counting the calls inside
// it at once.
type tokenHandler struct {
	tokens            chan struct{}
	inside, maxInside atomic.Int64
}

func (h *tokenHandler) HandleDecide(_ context.Context, _ string, items []decide.Request) []Result {
	n := h.inside.Add(1)
	for m := h.maxInside.Load(); n > m && !h.maxInside.CompareAndSwap(m, n); m = h.maxInside.Load() {
	}
	<-h.tokens
	h.inside.Add(-1)
	out := make([]Result, len(items))
	for i, it := range items {
		out[i] = echo(it)
	}
	return out
}

// A stream has at most MaxStreamBatches batches in process: the owner
// reads the next only once one is answered, and every batch is answered in
// the end.
func TestServer_DecideStream_boundsBatchesInProcess(t *testing.T) {
	h := &tokenHandler{tokens: make(chan struct{})}
	t.Cleanup(func() { close(h.tokens) })
	st := openRawStream(t, grpclimittest.DialRaw(t, startBoundedServer(t, h)))
	const sent = MaxStreamBatches + 4
	for i := range sent {
		raw, err := proto.Marshal(&peerv1.DecideBatch{Id: uint64(i + 1), Items: []*peerv1.Item{itemToProto(item(int64(i)))}})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SendMsg(&raw); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the owner to take a full set of batches", func() bool { return h.inside.Load() >= MaxStreamBatches })
	seen := map[uint64]bool{}
	for range sent {
		h.tokens <- struct{}{}
		var out peerv1.DecideBatchResult
		if err := st.RecvMsg(&out); err != nil {
			t.Fatal(err)
		}
		seen[out.GetId()] = true
	}
	if len(seen) != sent {
		t.Fatalf("answers for %d distinct batches, want %d", len(seen), sent)
	}
	if m := h.maxInside.Load(); m > MaxStreamBatches {
		t.Fatalf("%d batches in process at once, bound %d", m, MaxStreamBatches)
	}
}
