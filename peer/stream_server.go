package peer

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	peerv1 "github.com/weirhq/weir/api/weir/peer/v1"
)

// Bounds of DecideStream on the owner side.
const (
	// MaxStreamBatchBytes bounds one DecideBatch on the wire. The Client
	// sends a larger batch (one with items near MaxItemBytes) as a Decide
	// call instead, which the node's in-flight budget gates; a larger
	// DecideBatch ends its stream with RESOURCE_EXHAUSTED, as an oversized
	// Decide request is answered.
	MaxStreamBatchBytes = 1 << 20
	// MaxStreamBatches bounds the batches one stream has in process at the
	// owner: the stream reads no further batch until one is answered, and
	// HTTP/2 flow control holds the sender back. A Client sends at most
	// ClientConfig.MaxInFlight at once.
	MaxStreamBatches = 8
	// MaxStreamsPerConn bounds the DecideStreams open on one connection; a
	// Client opens one per peer (two while it replaces one). More are
	// refused with RESOURCE_EXHAUSTED.
	MaxStreamsPerConn = 4
)

// DecideStream reads batches and answers each with its id, as Decide
// answers a call: a batch the codec refused or one of more than MaxItems
// items ends the stream with Decide's status for it, after the batches
// already in process are answered. Each batch is decided in its own
// goroutine (at most MaxStreamBatches per stream), under the deadline the
// sender named, so a batch that waits for Redis holds back no other; the
// answers go out in the order they are ready, one Send at a time.
func (s *server) DecideStream(st grpc.BidiStreamingServer[peerv1.DecideBatch, peerv1.DecideBatchResult]) error {
	release, err := s.streams.acquire(st.Context())
	if err != nil {
		return err
	}
	defer release()
	var (
		wg     sync.WaitGroup
		sendMu sync.Mutex
		slots  = make(chan struct{}, MaxStreamBatches)
	)
	defer wg.Wait() // before the stream ends: no Send after it
	if s.drain != nil {
		ended := false // under sendMu: the handler returned, Send no more
		stop := context.AfterFunc(s.drain, func() {
			sendMu.Lock()
			defer sendMu.Unlock()
			if !ended {
				_ = st.Send(drainResult)
			}
		})
		defer func() {
			stop()
			sendMu.Lock()
			ended = true
			sendMu.Unlock()
		}()
	}
	for {
		// A slot first, then the read: no batch beyond MaxStreamBatches is
		// held, and flow control keeps the rest at the sender.
		select {
		case slots <- struct{}{}:
		case <-st.Context().Done():
			return status.FromContextError(st.Context().Err()).Err()
		}
		b, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := checkBatch(b, len(b.GetItems())); err != nil {
			return err
		}
		wg.Go(func() {
			defer func() { <-slots }()
			r := s.decideBatch(st.Context(), b)
			sendMu.Lock()
			defer sendMu.Unlock()
			_ = st.Send(r) // a failed Send ends the stream; Recv reports it
		})
	}
}

// drainResult asks the sender to close the stream (WithDrain). Batch ids
// start at 1, so id 0 answers none.
var drainResult = &peerv1.DecideBatchResult{Id: 0, Code: int32(codes.Unavailable), Error: "peer: the owner is shutting down; close this stream"}

// decideBatch answers one batch under its own deadline.
func (s *server) decideBatch(ctx context.Context, b *peerv1.DecideBatch) *peerv1.DecideBatchResult {
	if d := b.GetTimeoutNs(); d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(d))
		defer cancel()
	}
	results, err := s.decide(ctx, b.GetFromNode(), b.GetItems())
	if err != nil {
		st := status.Convert(err)
		return &peerv1.DecideBatchResult{Id: b.GetId(), Code: int32(st.Code()), Error: st.Message()}
	}
	return &peerv1.DecideBatchResult{Id: b.GetId(), Results: results}
}

// streamCount counts the DecideStreams open per connection, named by the
// remote address. Safe for concurrent use.
type streamCount struct {
	max int
	mu  struct {
		sync.Mutex
		open map[string]int
	}
}

func newStreamCount(max int) *streamCount {
	c := &streamCount{max: max}
	c.mu.open = make(map[string]int)
	return c
}

// acquire counts one stream on ctx's connection, or refuses it with
// RESOURCE_EXHAUSTED when max are open. Call release when it ends.
func (c *streamCount) acquire(ctx context.Context) (release func(), err error) {
	conn := ""
	if p, ok := grpcpeer.FromContext(ctx); ok && p.Addr != nil {
		conn = p.Addr.String()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.open[conn] >= c.max {
		return nil, status.Errorf(codes.ResourceExhausted, "peer: %d decide streams already open on this connection", c.max)
	}
	c.mu.open[conn]++
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.mu.open[conn]--; c.mu.open[conn] == 0 {
			delete(c.mu.open, conn)
		}
	}, nil
}
