package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/tlsfiles"
)

// Errors returned by Client methods.
var (
	// ErrClosed is returned by calls made after Close, and by calls that
	// were still pending when Close ran.
	ErrClosed = errors.New("client: closed")
	// ErrNegativeCost is returned by Decide for a cost below zero. It is
	// checked locally so that one bad call cannot fail a coalesced batch
	// shared with other callers.
	ErrNegativeCost = errors.New("client: negative cost")
)

// Client asks weir nodes for decisions over gRPC. It is safe for concurrent
// use by many goroutines; create one per process and share it.
type Client struct {
	cfg     Config
	conn    *grpc.ClientConn
	rpc     weirv1.RateLimiterClient
	batcher *batcher // nil when batching is off
	router  *router  // nil when routing is off
	leases  *leaser  // nil when leases are off

	renewers renewers // of the permits Acquire holds

	// life is cancelled by Close; every RPC is cut short by it.
	life   context.Context
	cancel context.CancelFunc
	bg     sync.WaitGroup // the TLS file watcher and the router, if any

	closeOnce sync.Once
	closeErr  error
}

// The Client's HTTP/2 flow-control windows are static. With gRPC's
// default, dynamic windows the receiver of data sends a PING after it
// whenever none is outstanding, to estimate the link's bandwidth-delay
// product: for a client that sends one decision per call, a PING and its
// ACK per answer, which the node must read and write. 1 MiB per call holds
// any plain answer; a larger one (a big DecideBatch) waits for window
// updates as it is read.
const (
	answerWindowBytes = 1 << 20
	connWindowBytes   = 16 << 20
)

// New validates cfg and returns a Client for cfg.Target. It does not
// connect: the connection is made on first use and re-made as needed (see
// grpc.NewClient). Transport security follows cfg.TLS (plaintext when nil);
// any grpc.DialOption in opts is applied after it, so
// grpc.WithTransportCredentials there replaces it. cfg is copied; the caller
// may reuse it.
func New(cfg Config, opts ...grpc.DialOption) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	creds, store := insecure.NewCredentials(), (*tlsfiles.Store)(nil)
	if cfg.TLS != nil {
		var err error
		if creds, store, err = cfg.TLS.open(); err != nil {
			return nil, err
		}
	}
	// Later options win, so the caller's credentials replace these.
	all := append([]grpc.DialOption{grpc.WithTransportCredentials(creds),
		grpc.WithStaticStreamWindowSize(answerWindowBytes), grpc.WithStaticConnWindowSize(connWindowBytes)}, opts...)
	conn, err := grpc.NewClient(cfg.Target, all...)
	if err != nil {
		return nil, fmt.Errorf("client: dial %q: %w", cfg.Target, err)
	}
	c := &Client{cfg: cfg, conn: conn, rpc: weirv1.NewRateLimiterClient(conn)}
	c.life, c.cancel = context.WithCancel(context.Background())
	if store != nil {
		c.bg.Go(func() { _ = store.Run(c.life) })
	}
	if cfg.Route {
		c.router = c.newRouter(all)
		c.bg.Go(func() { c.router.run(c.life) })
	}
	if cfg.Leases != nil {
		c.leases = newLeaser(*cfg.Leases, cfg.Timeout, weirv1.NewLeasesClient(conn))
		go c.leases.run()
	}
	if cfg.BatchWindow > 0 {
		c.batcher = newBatcher(c.life, c.sendBatch, c.decideOne, c.pick, cfg.BatchWindow, cfg.MaxBatch)
	}
	return c, nil
}

// Close is Shutdown with a context that ends after Config.Timeout.
func (c *Client) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
	defer cancel()
	return c.Shutdown(ctx)
}

// Shutdown gives the units of every lease held back to their owners (with
// Config.Leases; units it cannot return within ctx, or within
// LeaseConfig.RefreshTimeout, strand until their leases expire), then
// fails every pending call with ErrClosed, stops renewing the permits
// Acquire holds (they are not released: their slots come back at their
// TTL), waits for the client's goroutines to end and closes the
// connection. It is idempotent: later
// calls return the first call's result.
func (c *Client) Shutdown(ctx context.Context) error {
	c.closeOnce.Do(func() {
		if c.leases != nil {
			c.leases.shutdown(ctx)
		}
		c.renewers.close()
		c.cancel() // ends every renewer
		c.bg.Wait()
		c.renewers.wg.Wait()
		if c.batcher != nil {
			c.batcher.close()
		}
		if c.router != nil {
			c.router.close()
		}
		if err := c.conn.Close(); err != nil {
			c.closeErr = fmt.Errorf("client: close: %w", err)
		}
		if c.leases != nil {
			<-c.leases.done // at most RefreshTimeout after quit
		}
	})
	return c.closeErr
}

// Decide asks whether a request with these descriptors, costing cost units
// (0 means 1), may pass. With Config.BatchWindow > 0 the request may travel
// in one DecideBatch RPC with other callers' requests; the answer is this
// request's own either way.
//
// Decide returns when the answer arrives, when ctx ends or Config.Timeout
// elapses (the error then wraps ctx's error, e.g. context.DeadlineExceeded),
// or when the Client is closed (ErrClosed). Server errors are gRPC status
// errors, wrapped; use status.Code to read them. A request abandoned by its
// caller after it was sent may still have been decided (and consumed) by the
// server. The descriptors map is not retained after Decide returns.
func (c *Client) Decide(ctx context.Context, descriptors map[string]string, cost int64) (*weirv1.DecideResponse, error) {
	if cost < 0 {
		return nil, fmt.Errorf("client: decide: %w: %d", ErrNegativeCost, cost)
	}
	if c.life.Err() != nil {
		return nil, ErrClosed
	}
	var e *entry
	if c.leases != nil {
		var resp *weirv1.DecideResponse
		var ok bool
		if resp, e, ok = c.leases.decide(ctx, descriptors, max(cost, 1)); ok {
			return resp, nil
		}
		c.leases.decideRPCs.Add(1)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	var resp *weirv1.DecideResponse
	var err error
	if c.batcher == nil {
		req := &weirv1.DecideRequest{Descriptors: descriptors, Cost: weirv1.DefaultCost(cost)}
		resp, err = c.decideOne(ctx, c.pick(req), req)
	} else {
		// The caller may return (and reuse its map) while the request
		// waits in a batch, so the batch gets its own copy.
		req := &weirv1.DecideRequest{Descriptors: maps.Clone(descriptors), Cost: weirv1.DefaultCost(cost)}
		resp, err = c.batcher.do(ctx, req)
	}
	if err == nil && c.leases != nil {
		c.leases.noteDenials(e, resp, max(cost, 1))
	}
	return resp, c.callError(ctx, "decide", err)
}

// LeaseStats returns the lease side's counts; zero without Config.Leases.
// Safe for concurrent use.
func (c *Client) LeaseStats() LeaseStats {
	if c.leases == nil {
		return LeaseStats{}
	}
	return c.leases.stats()
}

// DecideBatch sends reqs as one DecideBatch RPC, never coalesced with other
// calls, and returns one response per request in the same order. The server
// validates every request before deciding any: one bad request fails the
// whole batch with INVALID_ARGUMENT and consumes nothing. The server accepts
// at most ServerMaxBatch requests per call. An empty reqs returns nil, nil.
// Errors are as for Decide.
func (c *Client) DecideBatch(ctx context.Context, reqs []*weirv1.DecideRequest) ([]*weirv1.DecideResponse, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	if c.life.Err() != nil {
		return nil, ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	resps, err := c.sendBatch(ctx, c.pickAll(reqs), reqs)
	return resps, c.callError(ctx, "decide batch", err)
}

// decideOne is one Decide RPC to the member to (Target when nil, or when
// to is retired, down or unreachable), cut short by Close.
func (c *Client) decideOne(ctx context.Context, to *memberConn, req *weirv1.DecideRequest) (*weirv1.DecideResponse, error) {
	ctx, cancel := c.bindLife(ctx)
	defer cancel()
	if to != nil && to.acquire() {
		resp, err := to.rpc.Decide(ctx, req)
		to.release()
		if !c.fallBack(ctx, to, err) {
			c.observe(resp.GetRingEpoch(), resp, err)
			return resp, err
		}
	}
	resp, err := c.rpc.Decide(ctx, req)
	c.observe(resp.GetRingEpoch(), resp, err)
	return resp, err
}

// sendBatch is one DecideBatch RPC to the member to (as for decideOne),
// cut short by Close, with the response count checked against the request
// count.
func (c *Client) sendBatch(ctx context.Context, to *memberConn, reqs []*weirv1.DecideRequest) ([]*weirv1.DecideResponse, error) {
	ctx, cancel := c.bindLife(ctx)
	defer cancel()
	in := &weirv1.DecideBatchRequest{Requests: reqs}
	var resp *weirv1.DecideBatchResponse
	var err error
	if to != nil && to.acquire() {
		resp, err = to.rpc.DecideBatch(ctx, in)
		to.release()
		if c.fallBack(ctx, to, err) {
			resp, err = c.rpc.DecideBatch(ctx, in)
		}
	} else {
		resp, err = c.rpc.DecideBatch(ctx, in)
	}
	if err != nil {
		return nil, err
	}
	if got := len(resp.GetResponses()); got != len(reqs) {
		return nil, fmt.Errorf("server returned %d responses for %d requests", got, len(reqs))
	}
	c.observe(resp.GetRingEpoch(), resp.GetResponses()[0], nil)
	return resp.GetResponses(), nil
}

// bindLife returns ctx cancelled also when the Client closes.
func (c *Client) bindLife(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.life, cancel)
	return ctx, func() { stop(); cancel() }
}

// callError turns the outcome of a call into the error the caller sees:
// ErrClosed if the Client closed, the context's error if ctx ended (the
// gRPC status then only repeats it), else the error wrapped with op.
func (c *Client) callError(ctx context.Context, op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrClosed):
		return ErrClosed
	case c.life.Err() != nil && status.Code(err) == codes.Canceled:
		return ErrClosed
	case ctx.Err() != nil:
		return fmt.Errorf("client: %s: %w", op, ctx.Err())
	case status.Code(err) == codes.DeadlineExceeded && deadlinePassed(ctx):
		// gRPC's own deadline timer can fire just before ctx's.
		return fmt.Errorf("client: %s: %w", op, context.DeadlineExceeded)
	}
	return fmt.Errorf("client: %s: %w", op, err)
}

func deadlinePassed(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}
