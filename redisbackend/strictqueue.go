package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// strictQueueBatches is how many full pipelines may wait in the strict
// queue: beyond that Redis is not keeping up, and waiting longer would
// only hold callers to their deadlines.
const strictQueueBatches = 16

// ErrStrictQueueFull is returned at once by StrictQueue.Decide when
// strictQueueBatches pipelines' worth of decisions already wait: Redis is
// not keeping up (the owner falls back with reason strict_queue_full).
var ErrStrictQueueFull = errors.New("redisbackend: strict queue full")

// Pipeliner is the part of Backend a StrictQueue sends with (redistest's
// in-memory twin implements it too).
type Pipeliner interface {
	DecidePipelined(ctx context.Context, reqs []DecideRequest) ([]Decision, []error, error)
}

// StrictQueue coalesces concurrent strict decisions into pipelines. Its
// idiom: callers append to a queue under mu; at most one sender goroutine
// runs, started by the first caller to find it idle. The sender sends what
// is queued at once, and whatever arrives meanwhile goes in the next
// pipeline, so a lone request pays no batching delay and a burst shares
// round trips.
type StrictQueue struct {
	backend  Pipeliner
	timeout  time.Duration
	maxBatch int
	mu       struct {
		sync.Mutex
		queue   []*strictCall
		sending bool
	}
}

type strictCall struct {
	ctx  context.Context
	req  DecideRequest
	d    Decision
	err  error
	done chan struct{}
}

// NewStrictQueue returns a queue sending through b, each pipeline within
// timeout and of at most maxBatch decisions (both positive). Safe for
// concurrent use; its one sender goroutine ends when the queue is empty.
func NewStrictQueue(b Pipeliner, timeout time.Duration, maxBatch int) (*StrictQueue, error) {
	if timeout <= 0 || maxBatch <= 0 {
		return nil, fmt.Errorf("redisbackend: strict queue needs a positive timeout (%s) and batch (%d)", timeout, maxBatch)
	}
	return &StrictQueue{backend: b, timeout: timeout, maxBatch: maxBatch}, nil
}

// Decide queues req and waits for its decision or for ctx to end. A caller
// that stops waiting may still have its request decided. When
// strictQueueBatches × maxBatch calls already wait, it fails at once with
// ErrStrictQueueFull.
func (q *StrictQueue) Decide(ctx context.Context, req DecideRequest) (Decision, error) {
	call := &strictCall{ctx: ctx, req: req, done: make(chan struct{})}
	q.mu.Lock()
	if limit := strictQueueBatches * q.maxBatch; len(q.mu.queue) >= limit {
		q.mu.Unlock()
		return Decision{}, fmt.Errorf("%w: %d decisions wait for Redis", ErrStrictQueueFull, limit)
	}
	q.mu.queue = append(q.mu.queue, call)
	start := !q.mu.sending
	q.mu.sending = true
	q.mu.Unlock()
	if start {
		go q.send()
	}
	select {
	case <-call.done:
		return call.d, call.err
	case <-ctx.Done():
		return Decision{}, ctx.Err()
	}
}

func (q *StrictQueue) send() {
	for {
		q.mu.Lock()
		n := min(len(q.mu.queue), q.maxBatch)
		if n == 0 {
			q.mu.sending = false
			q.mu.Unlock()
			return
		}
		batch := q.mu.queue[:n:n]
		q.mu.queue = q.mu.queue[n:]
		q.mu.Unlock()
		q.sendBatch(batch)
	}
}

func (q *StrictQueue) sendBatch(batch []*strictCall) {
	live := batch[:0:0]
	reqs := make([]DecideRequest, 0, len(batch))
	for _, c := range batch {
		if c.ctx.Err() != nil { // the caller gave up: spend nothing on it
			c.err = c.ctx.Err()
			close(c.done)
			continue
		}
		live = append(live, c)
		reqs = append(reqs, c.req)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), q.timeout)
	defer cancel()
	ds, errs, err := q.backend.DecidePipelined(ctx, reqs)
	for i, c := range live {
		switch {
		case err != nil && (errs == nil || errs[i] == nil):
			c.err = err
		case errs != nil && errs[i] != nil:
			c.err = errs[i]
		default:
			c.d = ds[i]
		}
		close(c.done)
	}
}
