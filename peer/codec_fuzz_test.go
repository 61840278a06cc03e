package peer

import (
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	peerv1 "github.com/weirhq/weir/api/weir/peer/v1"
	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/grpclimit"
)

// FuzzCodec_DecideBatch feeds arbitrary bytes through the peer server's
// codec as a DecideStream batch and as a Decide request: the codec never
// fails (refusals are recorded for the service), what it lets through is
// within the wire bounds (size, items, keys and limits per item) and
// decodes as proto.Unmarshal decodes it, and its items convert (an op only
// with a 16-byte id, its kind, id, reserve flag intact).
func FuzzCodec_DecideBatch(f *testing.F) {
	for _, b := range []*peerv1.DecideBatch{
		{},
		{Id: 1, FromNode: "n1", TimeoutNs: 1e9, Items: []*peerv1.Item{itemToProto(item(1))}},
		{Id: 2, Items: []*peerv1.Item{itemToProto(item(2)), {Group: "g", Keys: []string{"k"}}}},
		{Id: 3, Items: []*peerv1.Item{itemToProto(opItem(3, decide.OpSettle)), itemToProto(reserveItem(4))}},
		{Id: 4, Items: []*peerv1.Item{{Group: "g", Keys: []string{"k"}, Op: &peerv1.Op{Kind: 9, Id: []byte{1}}}}},
	} {
		raw, err := proto.Marshal(b)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{0x0a, 0x02, 0x12, 0x01, 0xff})
	c := newCodec()
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, m := range []proto.Message{&peerv1.DecideBatch{}, &peerv1.DecideRequest{}} {
			if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, m); err != nil {
				t.Fatalf("codec failed: %v", err)
			}
			if grpclimit.Refusal(m) != nil {
				continue
			}
			var items []*peerv1.Item
			switch m := m.(type) {
			case *peerv1.DecideBatch:
				if len(data) > MaxStreamBatchBytes {
					t.Fatalf("codec let through a batch of %d bytes", len(data))
				}
				items = m.GetItems()
			case *peerv1.DecideRequest:
				items = m.GetItems()
			}
			if len(items) > MaxItems {
				t.Fatalf("codec let through %d items", len(items))
			}
			want := m.ProtoReflect().New().Interface()
			if err := proto.Unmarshal(data, want); err != nil || !proto.Equal(m, want) {
				t.Fatalf("codec decoded %v, proto.Unmarshal %v (%v)", m, want, err)
			}
			for _, it := range items {
				if len(it.GetKeys()) > DefaultMaxKeys || len(it.GetLimits()) > DefaultMaxKeys {
					t.Fatalf("codec let through an item of %d keys, %d limits", len(it.GetKeys()), len(it.GetLimits()))
				}
				if it.GetOp() != nil && len(it.GetOp().GetId()) != 16 {
					t.Fatalf("codec let through an op with a %d-byte id", len(it.GetOp().GetId()))
				}
				r := itemFromProto(it)
				if len(r.Keys) != len(it.GetKeys()) || len(r.Limits) != len(it.GetLimits()) ||
					r.Reserve != it.GetReserve() || (r.Op != nil) != (it.GetOp() != nil) {
					t.Fatalf("itemFromProto(%v) = %+v", it, r)
				}
				if op := r.Op; op != nil {
					kind := it.GetOp().GetKind()
					if kind > 255 {
						kind = 0 // out of range reads as no kind
					}
					if op.ID != [16]byte(it.GetOp().GetId()) || uint32(op.Kind) != kind || op.TTL != it.GetOp().GetTtlNs() {
						t.Fatalf("op %v read as %+v", it.GetOp(), op)
					}
				}
			}
		}
	})
}
