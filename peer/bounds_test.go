package peer

import (
	"context"
	"math"
	"strings"
	"sync"
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

// startBoundedServer serves h with DefaultServerConfig's options, as the
// node does, until the test ends.
func startBoundedServer(t *testing.T, h Handler) string {
	t.Helper()
	cfg := DefaultServerConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return grpclimittest.Serve(t, cfg.ServerOptions(), func(s *grpc.Server) { Register(s, h) })
}

// invokeRaw sends raw as a Decide request on conn (a grpclimittest.DialRaw
// connection).
func invokeRaw(t *testing.T, conn *grpc.ClientConn, raw []byte) (*peerv1.DecideResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var out peerv1.DecideResponse
	err := conn.Invoke(ctx, "/weir.peer.v1.Peer/Decide", &raw, &out)
	return &out, err
}

// largestItem is the largest item the default Validator accepts: every
// field at its longest, varints at 10 bytes.
func largestItem() *peerv1.Item {
	key := "weir:{g}:" + strings.Repeat("k", DefaultMaxKeyBytes-len("weir:{g}:"))
	it := &peerv1.Item{Group: strings.Repeat("g", DefaultMaxKeyBytes), Cost: -1, NowUs: -1, Strict: true, Debt: true, Reserve: true,
		Op: &peerv1.Op{Kind: math.MaxUint32, Id: make([]byte, 16), TtlNs: -1, Actual: -1}}
	for range DefaultMaxKeys {
		it.Keys = append(it.Keys, key)
		it.Limits = append(it.Limits, &peerv1.Limit{IntervalUs: -1, Burst: -1})
	}
	return it
}

// The constants are what the largest valid item encodes to, and a request
// carrying it (with the longest sender name) passes the server's bounds.
func TestServer_largestValidRequestFits(t *testing.T) {
	it := largestItem()
	if got := proto.Size(it); got != MaxItemBytes {
		t.Fatalf("largest item encodes to %d bytes, MaxItemBytes is %d", got, MaxItemBytes)
	}
	req := &peerv1.DecideRequest{FromNode: strings.Repeat("n", MaxNodeNameBytes), Items: []*peerv1.Item{it}}
	if size := proto.Size(req); size > MaxRequestBytes {
		t.Fatalf("largest valid request is %d bytes, over MaxRequestBytes %d", size, MaxRequestBytes)
	}
	h := &fakeHandler{answer: func(decide.Request) Result { return Result{} }}
	resp, err := rawClient(t, startBoundedServer(t, h)).Decide(t.Context(), req)
	if err != nil || len(resp.GetResults()) != 1 {
		t.Fatalf("largest valid request: %v, %d results", err, len(resp.GetResults()))
	}
}

// Bytes that are not a valid request are the sender's fault:
// INVALID_ARGUMENT, not INTERNAL, and nothing reaches the handler. Counts
// beyond any valid request are refused before decoding; a message beyond
// MaxRequestBytes before it is read.
func TestServer_refusesMalformedAndOversized(t *testing.T) {
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
		"garbage":               {[]byte{0xff, 0xff, 0xff, 0xff, 0x0f}, codes.InvalidArgument},
		"truncated":             {field(1, field(2, []byte("weir:{a}:k")))[:5], codes.InvalidArgument},
		"invalid UTF-8 key":     {field(1, field(2, []byte("weir:{a}:\xff"))), codes.InvalidArgument},
		"invalid UTF-8 sender":  {field(2, []byte("\xc3")), codes.InvalidArgument},
		"too many items":        {repeat(MaxItems+1, field(1, nil)), codes.InvalidArgument},
		"too many keys":         {field(1, repeat(DefaultMaxKeys+1, field(2, nil))), codes.InvalidArgument},
		"too many limits":       {field(1, repeat(DefaultMaxKeys+1, field(3, nil))), codes.InvalidArgument},
		"over MaxRequestBytes":  {field(2, make([]byte, MaxRequestBytes)), codes.ResourceExhausted},
		"forged refusal marker": {protowire.AppendString(protowire.AppendTag(nil, protowire.MaxValidNumber, protowire.BytesType), "x"), codes.InvalidArgument},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := invokeRaw(t, conn, tc.raw); status.Code(err) != tc.code {
				t.Fatalf("err = %v, want %v", err, tc.code)
			}
		})
	}
	if n := len(h.batchSizes()); n != 0 {
		t.Fatalf("%d refused requests reached the handler", n)
	}
	ok, err := proto.Marshal(&peerv1.DecideRequest{FromNode: "n1", Items: []*peerv1.Item{itemToProto(item(1))}})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := invokeRaw(t, conn, ok); err != nil || len(resp.GetResults()) != 1 {
		t.Fatalf("valid request: %v, %v", resp, err)
	}
}

func TestServerConfig_Validate(t *testing.T) {
	if err := DefaultServerConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	c := DefaultServerConfig()
	c.MaxRecvMsgBytes, c.MaxConcurrentStreams, c.KeepaliveTime = MaxRequestBytes-1, 0, 0
	err := c.Validate()
	for _, want := range []string{"largest valid request", "streams", "keepalive time"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to mention %q", err, want)
		}
	}
}

// The client cuts a batch before it would exceed MaxRequestBytes, so the
// bounded server never refuses honest work for its size.
func TestQueue_batchCutBySize(t *testing.T) {
	calls := func(sizes ...int) []*call {
		out := make([]*call, len(sizes))
		for i, s := range sizes {
			out[i] = &call{ctx: context.Background(), size: s, done: make(chan answer, 1)}
		}
		return out
	}
	p := &peerQueue{from: "n1", maxBatch: 128, maxInFlight: 1, window: time.Hour, wg: &sync.WaitGroup{}}
	half := MaxRequestBytes/2 - 10
	for _, tc := range []struct {
		sizes []int
		want  int
	}{
		{[]int{half, half, half}, 2},
		{[]int{MaxRequestBytes + 1, 10}, 1}, // too large alone: sent alone, for the owner to refuse
		{make([]int, 200), 128},
		{nil, 0},
	} {
		if got := p.batchLen(calls(tc.sizes...)); got != tc.want {
			t.Errorf("batchLen(%d calls) = %d, want %d", len(tc.sizes), got, tc.want)
		}
	}
	// A batch full by size goes at once, without waiting for the window.
	p.mu.queue = calls(half, half, half)
	if b := p.takeLocked(); len(b) != 2 || len(p.mu.queue) != 1 {
		t.Fatalf("took %d, left %d; want 2 sent at once and 1 queued", len(b), len(p.mu.queue))
	}
	p.wg.Done()
	p.stopWindowLocked()
}

func TestItemFieldBytes(t *testing.T) {
	it := itemToProto(item(5))
	req := &peerv1.DecideRequest{Items: []*peerv1.Item{it, it}}
	if got, want := 2*itemFieldBytes(it), proto.Size(req); got != want {
		t.Fatalf("two items count %d bytes, the request is %d", got, want)
	}
}
