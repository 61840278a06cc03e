package peer

import (
	"context"
	"errors"
	"fmt"
	stdnet "net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	peerv1 "github.com/weirhq/weir/api/weir/peer/v1"
	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/grpclimit/grpclimittest"
)

// callCounts counts the forwarding calls a server saw: Decide calls and
// DecideStreams opened.
type callCounts struct{ unary, streams atomic.Int64 }

func (n *callCounts) options() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if info.FullMethod == peerv1.Peer_Decide_FullMethodName {
				n.unary.Add(1)
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if info.FullMethod == peerv1.Peer_DecideStream_FullMethodName {
				n.streams.Add(1)
			}
			return h(srv, ss)
		}),
	}
}

// serveCountingCalls serves h with the node's bounds on a :0 port, counting
// its forwarding calls; register (nil: Register) adds the services.
func serveCountingCalls(t *testing.T, h Handler, register func(*grpc.Server)) (string, *callCounts) {
	t.Helper()
	n := &callCounts{}
	if register == nil {
		register = func(s *grpc.Server) { Register(s, h) }
	}
	opts := append(DefaultServerConfig().ServerOptions(), n.options()...)
	return grpclimittest.Serve(t, opts, register), n
}

// Many concurrent callers share one stream, coalesced into batches, and
// each gets the answer to its own item.
func TestClient_Decide_streamManyCallers(t *testing.T) {
	h := &fakeHandler{}
	addr, n := serveCountingCalls(t, h, nil)
	c, _ := newClient(t, nil)
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := range 50 {
				now := int64(g*1000 + i + 1)
				r, err := c.Decide(t.Context(), addr, item(now))
				if err != nil {
					t.Errorf("caller %d call %d: %v", g, i, err)
					return
				}
				if r.Overall.TAT != now || len(r.Results) != 2 || r.Results[1].TAT != now+50*2 {
					t.Errorf("caller %d got %+v for now %d", g, r, now)
					return
				}
			}
		})
	}
	wg.Wait()
	if s, u := n.streams.Load(), n.unary.Load(); s != 1 || u != 0 {
		t.Fatalf("%d streams and %d Decide calls, want 1 stream and no call", s, u)
	}
	if sizes := h.batchSizes(); len(sizes) >= 32*50 {
		t.Fatalf("%d batches for %d items: nothing was coalesced", len(sizes), 32*50)
	}
}

// cutRelay pipes connections from a :0 port to target until cut, which
// closes every connection open at that moment (a peer that died, or a
// reset); later connections get through again.
type cutRelay struct {
	lis stdnet.Listener
	mu  sync.Mutex
	in  []stdnet.Conn
	wg  sync.WaitGroup
}

func newCutRelay(t *testing.T, target string) *cutRelay {
	t.Helper()
	lis, err := stdnet.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &cutRelay{lis: lis}
	t.Cleanup(func() {
		lis.Close()
		r.cut()
		r.wg.Wait()
	})
	r.wg.Go(func() {
		for {
			in, err := lis.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			r.in = append(r.in, in)
			r.mu.Unlock()
			r.wg.Go(func() { pipe(in, target) })
		}
	})
	return r
}

func (r *cutRelay) cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.in {
		c.Close()
	}
	r.in = nil
}

// A stream that breaks under a batch fails that batch's callers at once,
// not at their deadline, and the next call opens a new stream.
func TestClient_Decide_streamResetFailsPending(t *testing.T) {
	gate, release := newGate(t)
	entered := make(chan struct{}, 1)
	h := &fakeHandler{gate: gate, entered: entered}
	addr, n := serveCountingCalls(t, h, nil)
	relay := newCutRelay(t, addr)
	// The four calls leave as one batch, which the owner holds.
	c, _ := newClient(t, func(cfg *ClientConfig) { cfg.Timeout, cfg.Window, cfg.MaxBatch = ruledOut, ruledOut, 4 })
	errs := make(chan error, 4)
	start := time.Now()
	for range cap(errs) {
		go func() {
			_, err := c.Decide(callerGuard(t), relay.lis.Addr().String(), item(1))
			errs <- err
		}()
	}
	<-entered // a batch is at the owner
	relay.cut()
	for range cap(errs) {
		if err := <-errs; err == nil || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a caller on the broken stream: %v, want a transport error", err)
		}
	}
	returnedBefore(t, time.Since(start))
	release()
	var wg sync.WaitGroup
	for i := range 4 { // one batch, as the window waits for four
		wg.Go(func() {
			now := int64(10 + i)
			if r, err := c.Decide(callerGuard(t), relay.lis.Addr().String(), item(now)); err != nil || r.Overall.TAT != now {
				t.Errorf("a call after the reset: %+v, %v", r, err)
			}
		})
	}
	wg.Wait()
	if s := n.streams.Load(); s != 2 {
		t.Fatalf("%d streams opened, want 2 (one after the reset)", s)
	}
}

// A batch stuck at the owner holds back no other batch on the same stream:
// with two in flight, the next batch is answered while the first still
// waits; its caller stops waiting when its context ends (the deadline
// tests run over the stream too), and the stream serves on once the stuck
// batch answers.
func TestClient_Decide_streamFrozenBatch(t *testing.T) {
	gate, release := newGate(t)
	entered := make(chan struct{}, 1)
	h := &blockingHandler{stuck: 666, gate: gate, entered: entered}
	addr, n := serveCountingCalls(t, h, nil)
	c, _ := newClient(t, func(cfg *ClientConfig) { cfg.MaxInFlight, cfg.Timeout = 2, ruledOut })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stuck := make(chan error, 1)
	go func() {
		_, err := c.Decide(ctx, addr, item(666))
		stuck <- err
	}()
	<-entered
	if r, err := c.Decide(t.Context(), addr, item(7)); err != nil || r.Overall.TAT != 7 {
		t.Fatalf("a batch beside the stuck one: %+v, %v", r, err)
	}
	cancel() // the stuck caller gives up, as at its deadline
	if err := <-stuck; !errors.Is(err, context.Canceled) {
		t.Fatalf("the stuck caller: %v, want its context's end", err)
	}
	release()
	if r, err := c.Decide(t.Context(), addr, item(8)); err != nil || r.Overall.TAT != 8 {
		t.Fatalf("after the stuck batch answered: %+v, %v", r, err)
	}
	if s := n.streams.Load(); s != 1 {
		t.Fatalf("%d streams, want the one", s)
	}
}

// blockingHandler echoes, except that a batch holding an item stamped
// stuck waits for gate (past its context, like a hung owner).
type blockingHandler struct {
	stuck   int64
	gate    chan struct{}
	entered chan struct{}
}

func (h *blockingHandler) HandleDecide(_ context.Context, _ string, items []decide.Request) []Result {
	out := make([]Result, len(items))
	for i, it := range items {
		if it.Now == h.stuck {
			h.entered <- struct{}{}
			<-h.gate
		}
		out[i] = echo(it)
	}
	return out
}

// unaryOnlyServer is a node of the version before DecideStream: it answers
// Decide and nothing else.
type unaryOnlyServer struct {
	peerv1.UnimplementedPeerServer
	s *server
}

func (u unaryOnlyServer) Decide(ctx context.Context, req *peerv1.DecideRequest) (*peerv1.DecideResponse, error) {
	return u.s.Decide(ctx, req)
}

// A peer that answers DecideStream UNIMPLEMENTED (an older node during a
// rolling upgrade) gets Decide calls instead, and no caller sees the
// difference.
func TestClient_Decide_fallsBackToDecide(t *testing.T) {
	h := &fakeHandler{}
	addr, n := serveCountingCalls(t, h, func(s *grpc.Server) {
		peerv1.RegisterPeerServer(s, unaryOnlyServer{s: &server{h: h}})
	})
	c, _ := newClient(t, nil)
	for i := range 3 {
		now := int64(100 + i)
		if r, err := c.Decide(t.Context(), addr, item(now)); err != nil || r.Overall.TAT != now {
			t.Fatalf("call %d: %+v, %v", i, r, err)
		}
	}
	if s, u := n.streams.Load(), n.unary.Load(); s != 1 || u != 3 {
		t.Fatalf("%d streams tried and %d Decide calls, want 1 and 3", s, u)
	}
}

// A batch too large for a stream message goes as a Decide call (gated by
// the node's in-flight budget); the next small one goes on the stream.
func TestClient_Decide_largeBatchUsesDecide(t *testing.T) {
	h := &fakeHandler{}
	addr, n := serveCountingCalls(t, h, nil)
	c, _ := newClient(t, nil)
	big := item(5)
	big.Keys = []string{"weir:{acme}:" + strings.Repeat("k", MaxStreamBatchBytes), "weir:{acme}:b"}
	if r, err := c.Decide(t.Context(), addr, big); err != nil || r.Overall.TAT != 5 {
		t.Fatalf("a large item: %+v, %v", r, err)
	}
	if r, err := c.Decide(t.Context(), addr, item(6)); err != nil || r.Overall.TAT != 6 {
		t.Fatalf("a small item: %+v, %v", r, err)
	}
	if s, u := n.streams.Load(), n.unary.Load(); s != 1 || u != 1 {
		t.Fatalf("%d streams and %d Decide calls, want 1 and 1", s, u)
	}
}

// A handler that breaks its contract fails the batch, INTERNAL as Decide
// answers, and the stream serves on.
func TestClient_Decide_streamBatchError(t *testing.T) {
	var short atomic.Bool
	short.Store(true)
	addr, n := serveCountingCalls(t, handlerFunc(func(_ context.Context, _ string, items []decide.Request) []Result {
		if short.Load() {
			return nil
		}
		return []Result{echo(items[0])}
	}), nil)
	c, _ := newClient(t, nil)
	if _, err := c.Decide(t.Context(), addr, item(1)); status.Code(err) != codes.Internal {
		t.Fatalf("err = %v, want INTERNAL", err)
	}
	short.Store(false)
	if r, err := c.Decide(t.Context(), addr, item(2)); err != nil || r.Overall.TAT != 2 {
		t.Fatalf("the next batch: %+v, %v", r, err)
	}
	if s := n.streams.Load(); s != 1 {
		t.Fatalf("%d streams, want 1", s)
	}
}

// stallingServer is an owner whose first DecideStream never reads (a
// frozen process: its flow-control window is never returned); later
// streams are served as usual.
type stallingServer struct {
	peerv1.UnimplementedPeerServer
	s       *server
	streams atomic.Int64
	gate    chan struct{}
}

func (u *stallingServer) DecideStream(st grpc.BidiStreamingServer[peerv1.DecideBatch, peerv1.DecideBatchResult]) error {
	if u.streams.Add(1) == 1 {
		select {
		case <-u.gate:
		case <-st.Context().Done():
		}
		return nil
	}
	return u.s.DecideStream(st)
}

// A Send that the owner's flow control holds back (it stopped reading, as a
// frozen process does: once a batch larger than the stream's window is
// queued, the next Send waits for quota that never comes) ends its stream
// at the batch's deadline, so the sending slot is free again: the next call
// opens a new stream and is answered, instead of queueing behind a Send that
// waits for the owner to read.
func TestClient_Decide_streamSendStallEndsStream(t *testing.T) {
	gate, _ := newGate(t)
	h := &fakeHandler{}
	srv := &stallingServer{s: &server{h: h, streams: newStreamCount(MaxStreamsPerConn)}, gate: gate}
	addr, _ := serveCountingCalls(t, h, func(s *grpc.Server) { peerv1.RegisterPeerServer(s, srv) })
	c, _ := newClient(t, nil) // one batch in flight per peer: one sending slot
	big := item(1)
	for i := range 500 { // about 250 KiB: more than the 64 KiB window and the 64 KiB send quota together
		big.Keys = append(big.Keys, fmt.Sprintf("weir:{acme}:%03d:%s", i, strings.Repeat("k", 480)))
		big.Limits = append(big.Limits, gcra.Limit{Interval: 1000, Burst: 10})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := c.Decide(ctx, addr, big); err == nil {
		t.Fatal("a batch to an owner that never reads was answered")
	}
	stalled, cancelStalled := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancelStalled()
	if _, err := c.Decide(stalled, addr, item(8)); err == nil {
		t.Fatal("a batch behind the unread one was answered")
	}
	if r, err := c.Decide(t.Context(), addr, item(9)); err != nil || r.Overall.TAT != 9 {
		t.Fatalf("the next call: %+v, %v; want it answered on a new stream", r, err)
	}
	if n := srv.streams.Load(); n != 2 {
		t.Fatalf("%d streams opened, want 2", n)
	}
}

// A sender that picked the stream just before a redial retired it (a
// region report that timed out redials) sends nothing on it — a Send after
// CloseSend would fail and end the stream, failing the batches it still
// carries — and forwards on the new connection's stream instead.
func TestClient_Decide_streamRetiredBeforeSend(t *testing.T) {
	gate, release := newGate(t)
	entered := make(chan struct{}, 1)
	h := &blockingHandler{stuck: 666, gate: gate, entered: entered}
	addr, n := serveCountingCalls(t, h, nil)
	c, _ := newClient(t, func(cfg *ClientConfig) { cfg.MaxInFlight = 2 })
	stuck := make(chan error, 1)
	go func() {
		r, err := c.Decide(t.Context(), addr, item(666))
		if err == nil && r.Overall.TAT != 666 {
			err = fmt.Errorf("answered %+v", r)
		}
		stuck <- err
	}()
	<-entered // its batch is in flight on the stream
	p, err := c.peer(addr)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	s := p.mu.stream
	p.mu.Unlock()
	p.redial(s.pc)
	if _, err := s.decide(t.Context(), &peerv1.DecideBatch{}); !errors.Is(err, errStreamRetired) {
		t.Fatalf("a send on the retired stream: %v, want errStreamRetired", err)
	}
	release()
	if err := <-stuck; err != nil {
		t.Fatalf("the batch in flight on the retired stream: %v, want its answer", err)
	}
	if r, err := c.Decide(t.Context(), addr, item(2)); err != nil || r.Overall.TAT != 2 {
		t.Fatalf("after the redial: %+v, %v", r, err)
	}
	if got := n.streams.Load(); got != 2 {
		t.Fatalf("%d streams, want 2 (one per connection)", got)
	}
}

// Once the drain context ends, an open DecideStream asks its sender to
// close it and ends when it has, so a graceful stop of the peer server does
// not wait for the peer to forget this node; the sender's next call opens
// a new stream, which the stopping server no longer accepts.
func TestServer_DecideStream_drainEndsStreams(t *testing.T) {
	drain, stopDrain := context.WithCancel(t.Context())
	h := &fakeHandler{}
	lis, err := stdnet.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(DefaultServerConfig().ServerOptions()...)
	Register(gs, h, WithDrain(drain))
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	addr := lis.Addr().String()
	c, _ := newClient(t, nil)
	if r, err := c.Decide(t.Context(), addr, item(1)); err != nil || r.Overall.TAT != 1 {
		t.Fatalf("before the drain: %+v, %v", r, err)
	}
	stopDrain()
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("the graceful stop still waits for the peer's stream")
	}
}
