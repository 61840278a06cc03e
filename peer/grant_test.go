package peer

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	peerv1 "github.com/weirhq/weir/api/weir/peer/v1"
	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/grpclimit/grpclimittest"
	"github.com/weirhq/weir/ticket"
)

// opItem is item(now) as a Settle of reservation id 7.
func opItem(now int64, kind decide.OpKind) decide.Request {
	it := item(now)
	it.Cost = 0
	it.Op = &decide.Op{Kind: kind, ID: [16]byte{15: 7}, TTL: 3e9, Actual: 4}
	return it
}

// reserveItem is item(now) asking for a reservation.
func reserveItem(now int64) decide.Request {
	it := item(now)
	it.Reserve = true
	return it
}

func randGrant(r *rand.Rand) *decide.Grant {
	g := &decide.Grant{Done: r.IntN(2) == 0, Expiry: randInt64(r),
		Settlement: gcra.Settlement{Refunded: randInt64(r), Kept: randInt64(r), Extra: randInt64(r), Forgiven: randInt64(r)}}
	if r.IntN(2) == 0 {
		g.Permit = []byte("permit-" + strings.Repeat("p", r.IntN(9)))
	}
	if r.IntN(2) == 0 {
		g.Reservation = []byte("reservation")
	}
	for range r.IntN(4) {
		g.InFlight = append(g.InFlight, randInt64(r))
	}
	return g
}

func TestConvert_itemReserveAndOpRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 500 {
		want := item(randInt64(r))
		want.Reserve = r.IntN(2) == 0
		if r.IntN(2) == 0 {
			want.Cost = 0 // the wire carries 0 on op items
			want.Op = &decide.Op{Kind: decide.OpKind(r.IntN(256)), TTL: randInt64(r), Actual: randInt64(r)}
			for i := range want.Op.ID {
				want.Op.ID[i] = byte(r.Uint32())
			}
		}
		got := itemFromProto(wire(t, itemToProto(want), &peerv1.Item{}))
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip of %+v (op %+v) gave %+v (op %+v)", want, want.Op, got, got.Op)
		}
	}
}

// An op item goes with cost 0 whatever its Cost, and never with a Grant;
// an item without Op or Reserve encodes as before (no new fields).
func TestConvert_itemWireShape(t *testing.T) {
	it := opItem(1, decide.OpRelease)
	it.Cost, it.Grant = 5, &decide.Grant{Done: true}
	if p := itemToProto(it); p.GetCost() != 0 || p.GetOp().GetKind() != 1 || len(p.GetOp().GetId()) != 16 {
		t.Fatalf("op item on the wire: %v", p)
	}
	plain := item(1)
	plain.Grant = &decide.Grant{Done: true}
	old := &peerv1.Item{Group: plain.Group, Keys: plain.Keys, Cost: plain.Cost, NowNs: 1,
		Limits: []*peerv1.Limit{{IntervalNs: 1000, IntervalUs: 1, Burst: 10}, {IntervalNs: 50, IntervalUs: 1, Burst: 3}}}
	if a, b := proto.Size(itemToProto(plain)), proto.Size(old); a != b {
		t.Fatalf("a plain item encodes to %d bytes, %d before op and reserve", a, b)
	}
}

// A kind beyond a byte and an id of the wrong length read as the zero
// kind and id, which the owner's intake refuses, never as a valid one.
func TestConvert_opOutOfRange(t *testing.T) {
	for _, op := range []*peerv1.Op{{Kind: 257, Id: make([]byte, 16)}, {Kind: 1, Id: []byte{1, 2, 3}}, {Kind: 1, Id: make([]byte, 17)}} {
		got := itemFromProto(&peerv1.Item{Op: op}).Op
		if got == nil || (op.Kind > 255 && got.Kind != 0) || (len(op.Id) != 16 && got.ID != [16]byte{}) {
			t.Fatalf("op %v read as %+v", op, got)
		}
	}
}

func TestConvert_grantRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for range 500 {
		want := Result{Overall: randResult(r), Results: []gcra.Result{randResult(r)}, Grant: randGrant(r)}
		got := resultFromProto(wire(t, resultToProto(want), &peerv1.ItemResult{}))
		if reflect.DeepEqual(*want.Grant, decide.Grant{}) {
			want.Grant = nil
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip of %+v (grant %+v) gave %+v (grant %+v)", want, want.Grant, got, got.Grant)
		}
	}
	// No Grant, or a zero one, adds nothing to a plain result; nil reads nil.
	plain := Result{Overall: gcra.Result{Allowed: true}, Results: []gcra.Result{{Allowed: true}}}
	zero := plain
	zero.Grant = &decide.Grant{}
	if a, b := proto.Size(resultToProto(plain)), proto.Size(resultToProto(zero)); a != b {
		t.Fatalf("a zero Grant costs %d bytes over %d", b, a)
	}
	if got := resultFromProto(wire(t, resultToProto(plain), &peerv1.ItemResult{})); got.Grant != nil {
		t.Fatalf("a plain result read with Grant %+v", got.Grant)
	}
}

func TestCheckGrant(t *testing.T) {
	big := make([]byte, ticket.MaxBytes+1)
	for _, tc := range []struct {
		p    *peerv1.ItemResult
		keys int
		ok   bool
	}{
		{&peerv1.ItemResult{}, 0, true},
		{&peerv1.ItemResult{InFlight: []int64{1, 2}}, 2, true},
		{&peerv1.ItemResult{InFlight: []int64{1, 2, 3}}, 2, false},
		{&peerv1.ItemResult{Permit: big[:ticket.MaxBytes], Reservation: big[:ticket.MaxBytes]}, 1, true},
		{&peerv1.ItemResult{Permit: big}, 1, false},
		{&peerv1.ItemResult{Reservation: big}, 1, false},
	} {
		if err := checkGrant(tc.p, tc.keys); (err == nil) != tc.ok {
			t.Errorf("checkGrant(in_flight %d, permit %d, reservation %d bytes; %d keys) = %v", len(tc.p.InFlight), len(tc.p.Permit), len(tc.p.Reservation), tc.keys, err)
		}
	}
}

// opGrantHandler answers an item with a Grant that names what it received:
// Permit the op's id, InFlight one per key (the cost, or the op's kind),
// Done for an op, Reservation for Reserve.
func opGrantHandler(got chan<- decide.Request) *fakeHandler {
	return &fakeHandler{answer: func(it decide.Request) Result {
		got <- it
		r := echo(it)
		g := &decide.Grant{InFlight: make([]int64, len(it.Keys))}
		for i := range g.InFlight {
			g.InFlight[i] = it.Cost
		}
		if it.Reserve {
			g.Reservation = []byte("reservation")
		}
		if op := it.Op; op != nil {
			g.Permit, g.Done, g.Expiry = bytes.Clone(op.ID[:]), true, op.TTL
			g.Settlement = gcra.Settlement{Refunded: op.Actual, Kept: 1, Extra: 2, Forgiven: 3}
		}
		r.Grant = g
		return r
	}}
}

// Reserve, Op and the Grant cross the real wire both ways, on the stream
// and on the unary Decide an older peer is asked with, through the node's
// codec.
func TestClient_Decide_reserveOpGrantRoundTrip(t *testing.T) {
	for _, path := range []string{"stream", "unary"} {
		t.Run(path, func(t *testing.T) {
			got := make(chan decide.Request, 4)
			h := opGrantHandler(got)
			var register func(*grpc.Server)
			if path == "unary" {
				register = func(s *grpc.Server) { peerv1.RegisterPeerServer(s, unaryOnlyServer{s: &server{h: h}}) }
			}
			addr, n := serveCountingCalls(t, h, register)
			c, _ := newClient(t, nil)

			res := item(10)
			res.Reserve, res.Grant = true, &decide.Grant{}
			r, err := c.Decide(t.Context(), addr, res)
			if in := <-got; err != nil || !in.Reserve || in.Op != nil || in.Grant != nil {
				t.Fatalf("reserve: owner saw %+v; %v", in, err)
			}
			want := &decide.Grant{Reservation: []byte("reservation"), InFlight: []int64{2, 2}}
			if !reflect.DeepEqual(r.Grant, want) {
				t.Fatalf("reserve: grant %+v, want %+v", r.Grant, want)
			}

			op := opItem(11, decide.OpSettle)
			op.Cost = 9 // sent as 0
			r, err = c.Decide(t.Context(), addr, op)
			in := <-got
			if err != nil || in.Cost != 0 || in.Op == nil || *in.Op != *op.Op || in.Reserve {
				t.Fatalf("op: owner saw %+v (op %+v); %v", in, in.Op, err)
			}
			want = &decide.Grant{Permit: op.Op.ID[:], InFlight: []int64{0, 0}, Done: true, Expiry: 3e9,
				Settlement: gcra.Settlement{Refunded: 4, Kept: 1, Extra: 2, Forgiven: 3}}
			if !reflect.DeepEqual(r.Grant, want) {
				t.Fatalf("op: grant %+v, want %+v", r.Grant, want)
			}
			if s, u := n.streams.Load(), n.unary.Load(); (path == "stream") != (u == 0) || s != 1 {
				t.Fatalf("%s: %d streams, %d Decide calls", path, s, u)
			}
		})
	}
}

// An owner whose answer exceeds the bounds (more in-flight counts than
// the item has keys, a token over ticket.MaxBytes) is an owner error.
func TestClient_Decide_grantOutOfBounds(t *testing.T) {
	for _, g := range []*decide.Grant{{InFlight: []int64{1, 2, 3}}, {Permit: make([]byte, ticket.MaxBytes+1)}} {
		h := &fakeHandler{answer: func(it decide.Request) Result { r := echo(it); r.Grant = g; return r }}
		addr, _ := serveCountingCalls(t, h, nil)
		c, _ := newClient(t, nil)
		r, err := c.Decide(t.Context(), addr, item(1))
		if err != nil || r.Err == nil || r.Grant != nil || r.Results != nil {
			t.Fatalf("grant %d in flight, %d-byte permit: %+v, %v", len(g.InFlight), len(g.Permit), r, err)
		}
	}
}

// The codec refuses an op without an id of exactly 16 bytes, on Decide and
// on the stream, INVALID_ARGUMENT; a 16-byte id passes.
func TestCodec_opID(t *testing.T) {
	h := &fakeHandler{}
	addr := startBoundedServer(t, h)
	conn := grpclimittest.DialRaw(t, addr)
	for _, tc := range []struct {
		name string
		op   *peerv1.Op
		ok   bool
	}{
		{"16 bytes", &peerv1.Op{Kind: 1, Id: make([]byte, 16)}, true},
		{"15 bytes", &peerv1.Op{Kind: 1, Id: make([]byte, 15)}, false},
		{"17 bytes", &peerv1.Op{Kind: 1, Id: make([]byte, 17)}, false},
		{"no id", &peerv1.Op{Kind: 2, TtlNs: 5}, false},
	} {
		n := len(h.batchSizes())
		it := itemToProto(item(1))
		it.Cost, it.Op = 0, tc.op
		raw, err := proto.Marshal(&peerv1.DecideRequest{Items: []*peerv1.Item{it}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := invokeRaw(t, conn, raw); (err == nil) != tc.ok || (!tc.ok && status.Code(err) != codes.InvalidArgument) {
			t.Errorf("Decide, %s: %v", tc.name, err)
		}
		_, err = sendRaw(t, conn, mustMarshal(t, &peerv1.DecideBatch{Id: 1, Items: []*peerv1.Item{it}}))
		if (err == nil) != tc.ok || (!tc.ok && status.Code(err) != codes.InvalidArgument) {
			t.Errorf("stream batch, %s: %v", tc.name, err)
		}
		if got := len(h.batchSizes()) - n; (tc.ok && got != 2) || (!tc.ok && got != 0) {
			t.Errorf("%s: %d batches reached the handler", tc.name, got)
		}
	}
	// A repeated op is merged by proto: each occurrence is checked.
	good, bad := mustMarshal(t, &peerv1.Op{Kind: 1, Id: make([]byte, 16)}), mustMarshal(t, &peerv1.Op{Id: make([]byte, 3)})
	item := append(append([]byte{0x52, byte(len(good))}, good...), append([]byte{0x52, byte(len(bad))}, bad...)...)
	if err := scanRequest(append([]byte{0x0a, byte(len(item))}, item...)); err == nil {
		t.Error("a second op with a 3-byte id passed")
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
