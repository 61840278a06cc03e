package peer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/grpclimit"
)

// Client is a node's one client of the node-to-node plane. It forwards
// items to their owners over gRPC, coalescing concurrent items for the same
// peer into one batch on its DecideStream (Decide for large batches and
// older peers), and sends lease refreshes (Lease) and region
// reports (Send). It is safe for concurrent use; create one per node and
// share it.
//
// It holds one connection per peer address, made on first use, which every
// kind of call shares, and closed by Forget or Close (Send may replace it,
// see there).
type Client struct {
	cfg      ClientConfig
	logger   *slog.Logger
	metrics  *metrics
	dialOpts []grpc.DialOption
	wg       sync.WaitGroup // every sender goroutine of every peer

	mu struct {
		sync.Mutex
		closed bool
		peers  map[string]*peerQueue
	}
	closeOnce sync.Once
	closeErr  error
}

// NewClient validates cfg and returns a Client. It registers the forwarding
// metrics on reg (nil registers nothing) and logs to logger (nil discards).
// Connections use cfg.TLS, or plaintext when it is nil; dialOpts are added
// after it (later options win). cfg is copied.
func NewClient(cfg ClientConfig, logger *slog.Logger, reg prometheus.Registerer, dialOpts ...grpc.DialOption) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("peer: register metrics: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	creds := cfg.TLS
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	c := &Client{
		cfg:      cfg.withDefaults(),
		logger:   logger,
		metrics:  m,
		dialOpts: append([]grpc.DialOption{grpc.WithTransportCredentials(creds), grpc.WithStaticStreamWindowSize(answerWindowBytes), grpc.WithStaticConnWindowSize(grpclimit.ConnWindowBytes)}, dialOpts...),
	}
	c.mu.peers = make(map[string]*peerQueue)
	return c, nil
}

// Decide forwards it to the node at addr and waits for the answer, for ctx
// to end or for ClientConfig.Timeout, whichever comes first. It returns a
// nil error whenever the node answered, even when the answer is
// Result.NotOwner or Result.Err (which wraps ErrRemote).
//
// Errors: ctx.Err() when ctx ended first; ErrTimeout (which also matches
// context.DeadlineExceeded) when Timeout passed first; ErrClosed or
// ErrForgotten; or a wrapped gRPC error. After an error the item may or may
// not have been decided by the owner: it was certainly not if it was still
// queued, but a batch already sent is decided on (until its deadline) and its
// answer is dropped.
func (c *Client) Decide(ctx context.Context, addr string, it decide.Request) (Result, error) {
	start := time.Now()
	r, err := c.decide(ctx, addr, it)
	c.metrics.observe(start, r, err)
	return r, err
}

func (c *Client) decide(ctx context.Context, addr string, it decide.Request) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	p, err := c.peer(addr)
	if err != nil {
		return Result{}, err
	}
	tctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	pi := itemToProto(it)
	cl := &call{ctx: tctx, item: pi, size: itemFieldBytes(pi), done: make(chan answer, 1)}
	p.enqueue(cl)
	if a, ok := await(tctx, cl.done); ok {
		return a.result, a.err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	return Result{}, fmt.Errorf("%w: %s after %v: %w", ErrTimeout, addr, c.cfg.Timeout, context.DeadlineExceeded)
}

// peer returns the queue for addr, creating it and its connection on first
// use.
func (c *Client) peer(addr string) (*peerQueue, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return nil, ErrClosed
	}
	if p, ok := c.mu.peers[addr]; ok {
		return p, nil
	}
	conn, err := dial(addr, c.dialOpts)
	if err != nil {
		return nil, err
	}
	p := newPeerQueue(addr, conn, c)
	c.mu.peers[addr] = p
	return p, nil
}

// Forget closes the connection to addr, for a peer that left the cluster.
// Calls pending for it fail with ErrForgotten, and RPCs in flight on it of
// every kind are cancelled. A later call to addr connects afresh. Forgetting an unknown address does nothing.
func (c *Client) Forget(addr string) {
	c.mu.Lock()
	p, ok := c.mu.peers[addr]
	delete(c.mu.peers, addr)
	c.mu.Unlock()
	if ok {
		if err := p.close(ErrForgotten); err != nil {
			c.logger.Debug("peer: close connection", "addr", addr, "err", err)
		}
	}
}

// Close fails every pending call with ErrClosed, closes every connection and
// returns once the client's goroutines have ended. It is idempotent: later
// calls return the first call's result.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.mu.closed = true
		peers := c.mu.peers
		c.mu.peers = nil
		c.mu.Unlock()
		var errs []error
		for _, p := range peers {
			errs = append(errs, p.close(ErrClosed))
		}
		c.wg.Wait()
		if err := errors.Join(errs...); err != nil {
			c.closeErr = fmt.Errorf("peer: close: %w", err)
		}
	})
	return c.closeErr
}

// await waits for done's answer or for tctx to end. It reports ok with the
// answer unless the answer is a deadline error or tctx ended first with no
// answer waiting.
func await(tctx context.Context, done <-chan answer) (answer, bool) {
	select {
	case a := <-done:
		if !errors.Is(a.err, context.DeadlineExceeded) {
			return a, true
		}
		// The RPC's deadline is the latest of its batch, so ours has passed
		// too, even if our context's timer has not fired yet.
		<-tctx.Done()
	case <-tctx.Done():
		// Both may be ready after this process was descheduled, and select
		// picks at random: an answer that arrived is never thrown away.
		select {
		case a := <-done:
			if a.err == nil {
				return a, true
			}
		default:
		}
	}
	return answer{}, false
}

// answerWindowBytes is the static HTTP/2 window of the Client's streams,
// which carry the owners' answers. With gRPC's default, dynamic windows the
// receiver of data sends a PING after it whenever none is outstanding, to
// estimate the link's bandwidth-delay product: on a forwarding stream, a
// PING and its ACK for nearly every batch answered
// (TestClient_Decide_sendsNoBDPPings counted 299 for 300 forwards). Static
// windows send none. 1 MiB holds the answer to a full batch of plain
// decisions; a larger one (answers carrying big tokens) waits for window
// updates as it is read, never deadlocks.
const answerWindowBytes = 1 << 20
