package peer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	peerv1 "github.com/weirhq/weir/api/weir/peer/v1"
)

// unaryFor is how long a peerQueue forwards with Decide calls after the
// peer answered DecideStream UNIMPLEMENTED (a node of an older version,
// during a rolling upgrade) before it tries a stream again.
const unaryFor = time.Minute

// decideStream is one open DecideStream to a peer: batches go out with
// send, one at a time, and its receive goroutine routes each answer to the
// batch waiting for it by id. A stream that fails fails every batch
// waiting on it at once (dead closes); the peerQueue then opens another for
// the next batch.
//
// The stream counts as one RPC on its connection (peerConn.users) until
// receive ends, so a connection that redial retired closes once its
// stream has drained (retire).
type decideStream struct {
	pc     *peerConn
	st     peerv1.Peer_DecideStreamClient
	cancel context.CancelFunc
	sendMu sync.Mutex // one Send at a time
	// retired is set, under sendMu, once the sending side is closed
	// (retire): a Send after it would fail and end the stream. It is read
	// without the lock by stream, which must not wait behind a stalled Send.
	retired atomic.Bool
	dead    chan struct{} // closed when the stream ended; err says why

	mu struct {
		sync.Mutex
		next    uint64
		pending map[uint64]chan *peerv1.DecideBatchResult // buffered 1
		err     error
	}
}

// stream returns the open stream to the peer, opening one within ctx if
// there is none, or nil when the peer answers only Decide calls (or the
// queue is closed, which the Decide call then reports).
func (p *peerQueue) stream(ctx context.Context) (*decideStream, error) {
	p.streamMu.Lock()
	defer p.streamMu.Unlock()
	p.mu.Lock()
	closed, unary, s, current := p.mu.closeErr != nil, time.Now().Before(p.mu.unaryUntil), p.mu.stream, p.mu.conn
	p.mu.Unlock()
	if closed || unary {
		return nil, nil
	}
	if s != nil && !s.ended() && !s.isRetired() {
		if s.pc == current {
			return s, nil
		}
		s.retire() // on a connection redial replaced
	}
	s, err := p.openStream(ctx)
	p.mu.Lock()
	p.mu.stream = s
	p.mu.Unlock()
	return s, err
}

// openStream opens a DecideStream on the current connection once it is
// ready, waiting no longer than ctx, and starts its receive goroutine.
func (p *peerQueue) openStream(ctx context.Context) (*decideStream, error) {
	pc, err := p.acquire()
	if err != nil {
		return nil, err
	}
	if err := waitReady(ctx, pc); err != nil {
		p.release(pc)
		return nil, err
	}
	sctx, cancel := context.WithCancel(p.life)
	st, err := pc.peer.DecideStream(sctx)
	if err != nil {
		cancel()
		p.release(pc)
		return nil, err
	}
	s := &decideStream{pc: pc, st: st, cancel: cancel, dead: make(chan struct{})}
	s.mu.pending = make(map[uint64]chan *peerv1.DecideBatchResult)
	p.wg.Add(1) // the caller is a sender goroutine, counted: Close waits for this one too
	go p.receive(s)
	return s, nil
}

// waitReady waits until pc is connected, fails when it cannot connect, or
// returns ctx's error: opening a stream on a connection still connecting
// would wait for it beyond the batch's deadline.
func waitReady(ctx context.Context, pc *peerConn) error {
	pc.conn.Connect()
	for {
		switch state := pc.conn.GetState(); state {
		case connectivity.Ready:
			return nil
		case connectivity.TransientFailure, connectivity.Shutdown:
			return status.Errorf(codes.Unavailable, "peer: connection %s", state)
		default:
			if !pc.conn.WaitForStateChange(ctx, state) {
				return status.FromContextError(ctx.Err()).Err()
			}
		}
	}
}

// receive routes answers until the stream ends, then fails what waits on
// it and releases its connection.
func (p *peerQueue) receive(s *decideStream) {
	defer p.wg.Done()
	for {
		r, err := s.st.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) { // ended by the peer after retire
				err = status.Error(codes.Unavailable, "peer: decide stream ended")
			}
			s.end(err)
			p.release(s.pc)
			return
		}
		if r.GetId() == 0 { // the owner is draining (WithDrain)
			s.retire()
			continue
		}
		s.deliver(r)
	}
}

// decide sends one batch and waits for its answer, for the stream to fail
// or for ctx to end.
func (s *decideStream) decide(ctx context.Context, b *peerv1.DecideBatch) ([]*peerv1.ItemResult, error) {
	ch, err := s.register(b)
	if err != nil {
		return nil, err
	}
	if d, ok := ctx.Deadline(); ok {
		b.TimeoutNs = max(int64(time.Until(d)), 1)
	}
	if err := s.send(ctx, b); err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		if c := codes.Code(r.GetCode()); c != codes.OK {
			return nil, status.Error(c, r.GetError())
		}
		return r.GetResults(), nil
	case <-s.dead:
		return nil, s.err()
	case <-ctx.Done():
		s.forget(b.GetId())
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// errSendStalled ends a stream whose Send outlived its batch's deadline.
var errSendStalled = status.Error(codes.DeadlineExceeded, "peer: decide stream stalled: the owner stopped reading")

// errStreamRetired says a batch was not sent because its stream was
// retired (its connection redialled) after the sender picked it: the
// sender asks for the current stream and sends there.
var errStreamRetired = errors.New("peer: decide stream retired before the send")

// send sends b, waiting no longer than ctx. A Send blocks once the
// stream's send quota is spent, which happens when the owner stops reading
// (a frozen process: its flow-control window is never returned); past
// ctx's end the stream is ended, which returns the Send and fails what
// waits on the stream, so the sending slot is free and the next batch opens
// a new stream instead of queueing behind this one. A batch whose Send
// returned is left to its own deadline: its stream carries other batches
// (MaxInFlight above 1) that may be answered in time. On a retired stream
// nothing is sent (errStreamRetired).
func (s *decideStream) send(ctx context.Context, b *peerv1.DecideBatch) error {
	sent := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		select {
		case <-sent:
		default:
			s.end(errSendStalled)
		}
	})
	defer stop()
	s.sendMu.Lock()
	var err error
	if s.retired.Load() {
		err = errStreamRetired
	} else {
		err = s.st.Send(b)
	}
	s.sendMu.Unlock()
	close(sent)
	switch {
	case errors.Is(err, errStreamRetired):
		s.forget(b.GetId())
		return err
	case err != nil && !errors.Is(err, io.EOF): // io.EOF: Recv reports the real error
		s.end(err)
	}
	return nil
}

// register gives b an id and a channel for its answer.
func (s *decideStream) register(b *peerv1.DecideBatch) (chan *peerv1.DecideBatchResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.err != nil {
		return nil, s.mu.err
	}
	s.mu.next++
	b.Id = s.mu.next
	ch := make(chan *peerv1.DecideBatchResult, 1)
	s.mu.pending[b.Id] = ch
	return ch, nil
}

// deliver hands r to the batch waiting for it; an answer nobody waits for
// any more (its batch's deadline passed) is dropped.
func (s *decideStream) deliver(r *peerv1.DecideBatchResult) {
	s.mu.Lock()
	ch, ok := s.mu.pending[r.GetId()]
	delete(s.mu.pending, r.GetId())
	s.mu.Unlock()
	if ok {
		ch <- r
	}
}

func (s *decideStream) forget(id uint64) {
	s.mu.Lock()
	delete(s.mu.pending, id)
	s.mu.Unlock()
}

// end marks the stream failed with err (the first error wins) and cancels
// it, which ends receive.
func (s *decideStream) end(err error) {
	s.mu.Lock()
	first := s.mu.err == nil
	if first {
		s.mu.err = fmt.Errorf("peer: decide stream: %w", err)
		s.mu.pending = nil
	}
	s.mu.Unlock()
	if first {
		close(s.dead)
		s.cancel()
	}
}

func (s *decideStream) isRetired() bool { return s.retired.Load() }

func (s *decideStream) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.err
}

func (s *decideStream) ended() bool {
	select {
	case <-s.dead:
		return true
	default:
		return false
	}
}

// retire closes the sending side: the peer answers what it holds and ends
// the stream, and receive then releases the retired connection.
func (s *decideStream) retire() {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if !s.retired.Load() {
		s.retired.Store(true)
		_ = s.st.CloseSend()
	}
}
