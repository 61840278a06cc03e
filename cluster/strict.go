package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/weirhq/weir/redisbackend"
)

// strictQueueBatches is how many full pipelines may wait in the strict
// queue: beyond that Redis is not keeping up, and waiting longer would
// only hold callers to their deadlines.
const strictQueueBatches = 16

// errStrictQueueFull is returned at once by strictQueue.do when
// strictQueueBatches pipelines' worth of decisions already wait. The
// caller falls back with reason ReasonStrictQueueFull.
var errStrictQueueFull = errors.New("cluster: strict queue full")

// ReasonStrictQueueFull is the failure reason of a strict decision refused
// because too many were waiting for Redis.
const ReasonStrictQueueFull = "strict_queue_full"

// pipeliner is the part of redisbackend.Backend the strict queue uses.
type pipeliner interface {
	DecidePipelined(ctx context.Context, reqs []redisbackend.DecideRequest) ([]redisbackend.Decision, []error, error)
}

// strictQueue coalesces concurrent strict decisions into pipelines. Its
// idiom: callers append to a queue under mu; at most one sender goroutine
// runs, started by the first caller to find it idle. The sender sends what
// is queued at once, and whatever arrives meanwhile goes in the next
// pipeline, so a lone request pays no batching delay and a burst shares
// round trips.
type strictQueue struct {
	backend  pipeliner
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
	req  redisbackend.DecideRequest
	d    redisbackend.Decision
	err  error
	done chan struct{}
}

func newStrictQueue(b pipeliner, timeout time.Duration, maxBatch int) *strictQueue {
	return &strictQueue{backend: b, timeout: timeout, maxBatch: maxBatch}
}

// do queues req and waits for its decision or for ctx to end. A caller that
// stops waiting may still have its request decided. When
// strictQueueBatches × maxBatch calls already wait, it fails at once with
// errStrictQueueFull.
func (q *strictQueue) do(ctx context.Context, req redisbackend.DecideRequest) (redisbackend.Decision, error) {
	call := &strictCall{ctx: ctx, req: req, done: make(chan struct{})}
	q.mu.Lock()
	if limit := strictQueueBatches * q.maxBatch; len(q.mu.queue) >= limit {
		q.mu.Unlock()
		return redisbackend.Decision{}, fmt.Errorf("%w: %d decisions wait for Redis", errStrictQueueFull, limit)
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
		return redisbackend.Decision{}, ctx.Err()
	}
}

func (q *strictQueue) send() {
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

func (q *strictQueue) sendBatch(batch []*strictCall) {
	live := batch[:0:0]
	reqs := make([]redisbackend.DecideRequest, 0, len(batch))
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
