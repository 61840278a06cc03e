package rlqstest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
)

// Client runs a Filter against an RLQS server over gRPC as Envoy does:
// one stream, opened by the first request; the immediate report of each
// new bucket; every bucket reported each ReportingInterval; a stream that
// ends is reopened at the next report (its buckets and assignments stay,
// as Envoy keeps its bucket cache). Safe for concurrent use.
type Client struct {
	conn grpc.ClientConnInterface
	born time.Time
	mu   sync.Mutex // guards f and stream
	f    *Filter
	// stream is the open stream, nil when none; smu serialises Sends.
	stream rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient
	cancel context.CancelFunc
	smu    sync.Mutex
	ctx    context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup
	sent   atomic.Int64 // reports sent
	recv   atomic.Int64 // responses received
	opened atomic.Int64 // streams opened
	// lastErr is the last stream error seen (for test logs).
	lastErr atomic.Pointer[error]
}

// NewClient starts a client on conn. Close stops it.
func NewClient(conn grpc.ClientConnInterface, cfg FilterConfig) *Client {
	ctx, stop := context.WithCancel(context.Background())
	c := &Client{conn: conn, born: time.Now(), f: NewFilter(cfg), ctx: ctx, stop: stop}
	c.wg.Go(c.report)
	return c
}

func (c *Client) now() int64 { return int64(time.Since(c.born)) }

// Request decides one request of bucket id now.
func (c *Client) Request(id map[string]string) bool {
	c.mu.Lock()
	ok, first := c.f.Request(id, c.now())
	c.mu.Unlock()
	if first != nil {
		c.send(first)
	}
	return ok
}

// report sends every bucket's usage each reporting interval.
func (c *Client) report() {
	t := time.NewTicker(c.f.cfg.ReportingInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		c.mu.Lock()
		rep := c.f.Report(c.now())
		c.mu.Unlock()
		if len(rep.GetBucketQuotaUsages()) > 0 {
			c.send(rep)
		}
	}
}

// send sends rep on the open stream, opening one if there is none.
func (c *Client) send(rep *rlqsv3.RateLimitQuotaUsageReports) {
	c.smu.Lock()
	defer c.smu.Unlock()
	st := c.open()
	if st == nil {
		return // Envoy drops the report when it cannot open a stream
	}
	if err := st.Send(rep); err != nil {
		c.fail(st, err)
		return
	}
	c.sent.Add(1)
}

// open returns the open stream or opens one; nil if that fails.
func (c *Client) open() rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stream != nil || c.ctx.Err() != nil {
		return c.stream
	}
	ctx, cancel := context.WithCancel(c.ctx)
	st, err := rlqsv3.NewRateLimitQuotaServiceClient(c.conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		cancel()
		c.lastErr.Store(&err)
		return nil
	}
	c.stream, c.cancel = st, cancel
	c.opened.Add(1)
	c.wg.Go(func() { c.receive(st) })
	return st
}

func (c *Client) receive(st rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient) {
	for {
		resp, err := st.Recv()
		if err != nil {
			c.fail(st, err)
			return
		}
		c.recv.Add(1)
		c.mu.Lock()
		c.f.Apply(resp, c.now())
		c.mu.Unlock()
	}
}

// fail forgets st if it is still the open stream.
func (c *Client) fail(st rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stream == st {
		c.cancel()
		c.stream = nil
	}
	if !errors.Is(err, context.Canceled) {
		c.lastErr.Store(&err)
	}
}

// Cut ends the open stream from the client side, as a broken connection
// would; the next report opens a new one.
func (c *Client) Cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stream != nil {
		c.cancel()
		c.stream = nil
	}
}

// Messages returns the reports sent, responses received and streams
// opened so far.
func (c *Client) Messages() (sent, received, streams int64) {
	return c.sent.Load(), c.recv.Load(), c.opened.Load()
}

// Err returns the last stream error seen, or nil.
func (c *Client) Err() error {
	if p := c.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Close stops reporting and ends the stream.
func (c *Client) Close() {
	c.stop()
	c.wg.Wait()
}
