package client

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
)

// batcher coalesces concurrent single requests into DecideBatch RPCs.
//
// Concurrency: one goroutine (loop) owns the batch being filled. Callers hand
// it a call over an unbuffered channel and then wait on the call's own
// buffered done channel, or on their context. A full or timed-out batch is
// sent by a goroutine of its own, so filling the next batch never waits for
// the network. close stops the loop, which fails the calls it holds, cancels
// in-flight sends (through life) and waits for every goroutine.
//
// Every call that reaches the loop gets exactly one result, written once to
// its done channel; nobody may be listening any more, which the buffer makes
// harmless.
type batcher struct {
	life context.Context // cancelled by Client.Close
	send func(context.Context, *memberConn, []*weirv1.DecideRequest) ([]*weirv1.DecideResponse, error)
	one  func(context.Context, *memberConn, *weirv1.DecideRequest) (*weirv1.DecideResponse, error)
	// pick names the member a request goes to; nil is Target.
	pick   func(*weirv1.DecideRequest) *memberConn
	window time.Duration
	max    int

	in        chan *call
	quit      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup // loop and senders
}

type call struct {
	ctx  context.Context // the caller's, with the client timeout applied
	req  *weirv1.DecideRequest
	done chan result // buffered 1
}

type result struct {
	resp *weirv1.DecideResponse
	err  error
}

func newBatcher(
	life context.Context,
	send func(context.Context, *memberConn, []*weirv1.DecideRequest) ([]*weirv1.DecideResponse, error),
	one func(context.Context, *memberConn, *weirv1.DecideRequest) (*weirv1.DecideResponse, error),
	pick func(*weirv1.DecideRequest) *memberConn,
	window time.Duration, maxBatch int,
) *batcher {
	b := &batcher{
		life: life, send: send, one: one, pick: pick, window: window, max: maxBatch,
		in:   make(chan *call),
		quit: make(chan struct{}),
	}
	b.wg.Add(1)
	go b.loop()
	return b
}

// do queues req and waits for its response, for ctx to end (returning
// ctx.Err()) or for close (ErrClosed).
func (b *batcher) do(ctx context.Context, req *weirv1.DecideRequest) (*weirv1.DecideResponse, error) {
	c := &call{ctx: ctx, req: req, done: make(chan result, 1)}
	select {
	case b.in <- c:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-b.quit:
		return nil, ErrClosed
	}
	select {
	case r := <-c.done:
		return r.resp, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// close fails pending calls with ErrClosed and waits for all goroutines. The
// caller cancels life first so that in-flight sends end promptly.
func (b *batcher) close() {
	b.closeOnce.Do(func() { close(b.quit) })
	b.wg.Wait()
}

func (b *batcher) loop() {
	defer b.wg.Done()
	var pending []*call
	timer := time.NewTimer(b.window)
	timer.Stop()
	var tick <-chan time.Time // nil while nothing is pending
	flush := func() {
		timer.Stop() // since Go 1.23 no stale tick survives Stop
		tick = nil
		batch := pending
		pending = nil
		b.wg.Add(1) // the loop's own count keeps the counter above zero
		go b.sendCalls(batch)
	}
	for {
		select {
		case c := <-b.in:
			pending = append(pending, c)
			if len(pending) == 1 {
				timer.Reset(b.window)
				tick = timer.C
			}
			if len(pending) >= b.max {
				flush()
			}
		case <-tick:
			flush()
		case <-b.quit:
			timer.Stop()
			for _, c := range pending {
				c.done <- result{err: ErrClosed}
			}
			return
		}
	}
}

// sendCalls sends the calls whose callers still wait as one DecideBatch per
// member they are routed to (one in all to Target without routing),
// concurrently, and hands each its own response.
func (b *batcher) sendCalls(calls []*call) {
	defer b.wg.Done()
	groups := map[*memberConn][]*call{}
	var order []*memberConn
	for _, c := range calls {
		if err := c.ctx.Err(); err != nil {
			c.done <- result{err: err} // gone: do not spend its quota
			continue
		}
		to := b.pick(c.req)
		if _, ok := groups[to]; !ok {
			order = append(order, to)
		}
		groups[to] = append(groups[to], c)
	}
	if len(order) == 1 {
		b.sendGroup(order[0], groups[order[0]])
		return
	}
	var wg sync.WaitGroup
	for _, to := range order {
		wg.Go(func() { b.sendGroup(to, groups[to]) })
	}
	wg.Wait()
}

// sendGroup sends live calls as one DecideBatch to member to (nil: Target).
// The RPC may run until the latest of their deadlines.
func (b *batcher) sendGroup(to *memberConn, live []*call) {
	ctx, cancel := latestDeadline(b.life, live)
	defer cancel()
	reqs := make([]*weirv1.DecideRequest, len(live))
	for i, c := range live {
		reqs[i] = c.req
	}
	resps, err := b.send(ctx, to, reqs)
	if status.Code(err) == codes.InvalidArgument && len(live) > 1 {
		// One caller's bad request fails the whole batch and consumes
		// nothing, so ask again one by one: each caller gets its own
		// answer and only the bad ones see the error.
		b.sendEach(ctx, to, live)
		return
	}
	for i, c := range live {
		if err != nil {
			c.done <- result{err: err}
		} else {
			c.done <- result{resp: resps[i]}
		}
	}
}

// sendEach decides every call with its own Decide RPC, concurrently.
func (b *batcher) sendEach(ctx context.Context, to *memberConn, calls []*call) {
	var wg sync.WaitGroup
	for _, c := range calls {
		wg.Go(func() {
			resp, err := b.one(ctx, to, c.req)
			c.done <- result{resp: resp, err: err}
		})
	}
	wg.Wait()
}

// latestDeadline derives from parent a context that ends at the latest
// deadline among calls, so that no caller that still waits is cut short.
func latestDeadline(parent context.Context, calls []*call) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, c := range calls {
		d, ok := c.ctx.Deadline()
		if !ok {
			// Decide always sets one; without it, only Close ends the RPC.
			return context.WithCancel(parent)
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(parent, latest)
}
