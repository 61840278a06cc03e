package peer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	peerv1 "github.com/weirhq/weir/api/weir/peer/v1"
)

// peerQueue batches the items bound for one peer, and holds the peer's
// connection (conn.go), on which Lease and Send make their RPCs too.
//
// Concurrency: a mutex guards the queue; there is no goroutine per peer.
// Whoever makes a batch ready (an enqueue, the window timer, or a sender
// whose RPC returned) takes it under the lock, counting one RPC slot. A new
// slot starts a sender goroutine; a sender that finishes an RPC takes the
// next ready batch itself and ends when none is ready, releasing its slot.
// So at most MaxInFlight RPCs run per peer, and items queue only while all
// slots are busy (or the window is open).
//
// Every call enqueued gets exactly one answer on its buffered done channel;
// its caller may have stopped listening, which the buffer makes harmless.
type peerQueue struct {
	addr        string
	dialOpts    []grpc.DialOption // the Client's, for redial
	from        string
	maxBatch    int
	maxInFlight int
	maxQueue    int
	window      time.Duration
	metrics     *metrics
	wg          *sync.WaitGroup // the Client's

	// life is cancelled by close; it ends in-flight RPCs and the stream.
	life   context.Context
	cancel context.CancelFunc

	streamMu sync.Mutex // held to look up or open the stream (stream_client.go); before mu

	mu struct {
		sync.Mutex
		queue      []*call
		inflight   int
		expired    bool                   // the window of the oldest queued call passed
		timer      *time.Timer            // running while the window is open
		closeErr   error                  // set once by close
		conn       *peerConn              // the connection new RPCs use (conn.go)
		retired    map[*peerConn]struct{} // replaced by redial, RPCs still on them
		stream     *decideStream          // the DecideStream batches use; nil before the first
		unaryUntil time.Time              // forward with Decide calls until then (stream_client.go)
	}
}

type call struct {
	ctx  context.Context // the caller's, with the client Timeout applied
	item *peerv1.Item
	size int         // item's encoded size in a DecideRequest (itemFieldBytes)
	done chan answer // buffered 1
}

// itemFieldBytes is its encoded size as a field of a DecideRequest.
func itemFieldBytes(it *peerv1.Item) int {
	return protowire.SizeTag(1) + protowire.SizeBytes(proto.Size(it))
}

type answer struct {
	result Result
	err    error
}

func newPeerQueue(addr string, conn *peerConn, c *Client) *peerQueue {
	p := &peerQueue{
		addr: addr, dialOpts: c.dialOpts, from: c.cfg.LocalName,
		maxBatch: c.cfg.MaxBatch, maxInFlight: c.cfg.MaxInFlight, maxQueue: c.cfg.MaxQueue, window: c.cfg.Window,
		metrics: c.metrics, wg: &c.wg,
	}
	p.mu.conn, p.mu.retired = conn, make(map[*peerConn]struct{})
	p.life, p.cancel = context.WithCancel(context.Background())
	return p
}

// enqueue queues cl and starts a sender if a batch is ready and a slot free.
func (p *peerQueue) enqueue(cl *call) {
	p.mu.Lock()
	if err := p.mu.closeErr; err != nil {
		p.mu.Unlock()
		cl.done <- answer{err: err}
		return
	}
	if len(p.mu.queue) >= p.maxQueue {
		p.mu.Unlock()
		cl.done <- answer{err: fmt.Errorf("%w: %s has %d items waiting", ErrQueueFull, p.addr, p.maxQueue)}
		return
	}
	p.mu.queue = append(p.mu.queue, cl)
	if p.window > 0 && p.mu.timer == nil {
		p.mu.timer = time.AfterFunc(p.window, p.windowPassed)
	}
	batch := p.takeLocked()
	p.mu.Unlock()
	if batch != nil {
		go p.run(batch)
	}
}

func (p *peerQueue) windowPassed() {
	p.mu.Lock()
	p.mu.timer = nil
	p.mu.expired = true
	batch := p.takeLocked()
	p.mu.Unlock()
	if batch != nil {
		go p.run(batch)
	}
}

// takeLocked returns the next batch to send and takes an RPC slot for it,
// or nil when no batch is ready or no slot is free. Calls whose callers gave
// up are answered and dropped here, unsent: they never spend quota.
func (p *peerQueue) takeLocked() []*call {
	if p.mu.closeErr != nil || p.mu.inflight >= p.maxInFlight {
		return nil
	}
	live := p.mu.queue[:0]
	for _, cl := range p.mu.queue {
		if err := cl.ctx.Err(); err != nil {
			cl.done <- answer{err: err}
			continue
		}
		live = append(live, cl)
	}
	clear(p.mu.queue[len(live):])
	p.mu.queue = live
	n := p.batchLen(live)
	full := n == p.maxBatch || n < len(live)
	if n == 0 || (p.window > 0 && !p.mu.expired && !full) {
		return nil
	}
	batch := make([]*call, n)
	copy(batch, live)
	p.mu.queue = append(live[:0], live[n:]...)
	clear(live[len(p.mu.queue):])
	if len(p.mu.queue) == 0 {
		p.stopWindowLocked()
	}
	p.mu.inflight++
	p.wg.Add(1) // before close can mark the queue closed, so before Wait
	return batch
}

// batchLen is how many calls from the head of queue make the next batch:
// at most maxBatch, and no more than fit in MaxRequestBytes with the
// sender's name, but always one if queue is not empty (an item too large
// on its own is the owner's to refuse).
func (p *peerQueue) batchLen(queue []*call) int {
	budget := MaxRequestBytes - protowire.SizeTag(2) - protowire.SizeBytes(len(p.from))
	n := 0
	for n < len(queue) && n < p.maxBatch {
		if budget -= queue[n].size; budget < 0 && n > 0 {
			break
		}
		n++
	}
	return n
}

func (p *peerQueue) stopWindowLocked() {
	if p.mu.timer != nil {
		p.mu.timer.Stop()
		p.mu.timer = nil
	}
	p.mu.expired = false
}

// run sends batch, then keeps sending ready batches on the same slot.
func (p *peerQueue) run(batch []*call) {
	defer p.wg.Done()
	for {
		p.send(batch)
		p.mu.Lock()
		p.mu.inflight--
		next := p.takeLocked()
		p.mu.Unlock()
		if next == nil {
			return
		}
		p.wg.Done() // takeLocked counted a new sender; this one carries on
		batch = next
	}
}

// send forwards batch and answers every call in it. It may wait until the
// latest of the callers' deadlines, so none is cut short.
func (p *peerQueue) send(batch []*call) {
	ctx, cancel := latestDeadline(p.life, batch)
	defer cancel()
	items := make([]*peerv1.Item, len(batch))
	size := protowire.SizeTag(2) + protowire.SizeBytes(len(p.from))
	for i, cl := range batch {
		items[i] = cl.item
		size += cl.size
	}
	p.metrics.batchSize.Observe(float64(len(batch)))
	results, err := p.forward(ctx, items, size)
	if err == nil && len(results) != len(batch) {
		err = fmt.Errorf("peer: %s answered %d results for %d items", p.addr, len(results), len(batch))
	}
	if err != nil {
		p.metrics.rpcErrors.Inc()
		err = p.rpcError(err)
		for _, cl := range batch {
			cl.done <- answer{err: err}
		}
		return
	}
	for i, cl := range batch {
		if err := checkGrant(results[i], len(cl.item.GetKeys())); err != nil {
			cl.done <- answer{result: Result{Err: fmt.Errorf("%w: %w", ErrRemote, err)}}
			continue
		}
		cl.done <- answer{result: resultFromProto(results[i])}
	}
}

// forward sends items of size encoded bytes on the peer's DecideStream,
// or as a Decide call when they are too large for a stream batch or the
// peer serves no stream. A stream the peer answers UNIMPLEMENTED decided
// nothing, so the batch goes again as a Decide call.
func (p *peerQueue) forward(ctx context.Context, items []*peerv1.Item, size int) ([]*peerv1.ItemResult, error) {
	if size+maxBatchHeaderBytes <= MaxStreamBatchBytes {
		s, err := p.stream(ctx)
		if err != nil {
			return nil, err
		}
		if s != nil {
			b := &peerv1.DecideBatch{Items: items, FromNode: p.from}
			rs, err := s.decide(ctx, b)
			if errors.Is(err, errStreamRetired) { // a redial replaced it meanwhile
				if s, err = p.stream(ctx); err != nil {
					return nil, err
				}
				if s != nil {
					rs, err = s.decide(ctx, b)
				}
			}
			if s != nil && status.Code(err) != codes.Unimplemented {
				return rs, err
			}
			p.mu.Lock()
			p.mu.unaryUntil = time.Now().Add(unaryFor)
			p.mu.Unlock()
		}
	}
	resp, err := p.decide(ctx, &peerv1.DecideRequest{FromNode: p.from, Items: items})
	return resp.GetResults(), err
}

// decide makes the Decide RPC on the current connection.
func (p *peerQueue) decide(ctx context.Context, req *peerv1.DecideRequest) (*peerv1.DecideResponse, error) {
	pc, err := p.acquire()
	if err != nil {
		return nil, err
	}
	defer p.release(pc)
	return pc.peer.Decide(ctx, req)
}

// maxBatchHeaderBytes bounds what a DecideBatch adds to a DecideRequest's
// fields: its id and timeout, two varints of at most 10 bytes and a tag.
const maxBatchHeaderBytes = 2 * (1 + 10)

// rpcError explains a failed RPC: the close reason when the queue was
// closed under it, ErrTimeout for a deadline, else the wrapped error.
func (p *peerQueue) rpcError(err error) error {
	if p.life.Err() != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.mu.closeErr
	}
	if status.Code(err) == codes.DeadlineExceeded {
		return fmt.Errorf("%w: %s: %w", ErrTimeout, p.addr, context.DeadlineExceeded)
	}
	return fmt.Errorf("peer: forward to %s: %w", p.addr, err)
}

// close fails queued calls with err, cancels in-flight RPCs and closes the
// connection. Only the first call acts.
func (p *peerQueue) close(err error) error {
	p.mu.Lock()
	if p.mu.closeErr != nil {
		p.mu.Unlock()
		return nil
	}
	p.mu.closeErr = err
	queue := p.mu.queue
	p.mu.queue = nil
	p.stopWindowLocked()
	conns := p.takeConnsLocked()
	p.mu.Unlock()
	p.cancel()
	for _, cl := range queue {
		cl.done <- answer{err: err}
	}
	return closeConns(conns)
}

// latestDeadline derives from parent a context ending at the latest of the
// calls' deadlines. Every call has one: Decide applies the Timeout.
func latestDeadline(parent context.Context, calls []*call) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, cl := range calls {
		if d, ok := cl.ctx.Deadline(); ok && d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(parent, latest)
}
