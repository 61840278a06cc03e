package client

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
)

// newRouter builds the router of a Client with Config.Route, dialling
// members with opts: the credentials and options Target was dialled with.
func (c *Client) newRouter(opts []grpc.DialOption) *router {
	r := &router{
		dial:     func(addr string) (*grpc.ClientConn, error) { return grpc.NewClient(addr, opts...) },
		every:    c.cfg.RouteRefresh,
		timeout:  max(c.cfg.Timeout, minTopologyTimeout),
		maxConns: c.cfg.MaxRouteConns,
		kick:     make(chan struct{}, 1),
		conns:    map[string]*memberConn{},
	}
	r.fetchers = func() []weirv1.RateLimiterClient {
		return append([]weirv1.RateLimiterClient{c.rpc}, r.memberClients()...)
	}
	return r
}

// minTopologyTimeout bounds a Topology call from below: its answer is a few
// kilobytes, and no caller waits for it.
const minTopologyTimeout = time.Second

// pick returns the member connection to send req to; nil means Target.
func (c *Client) pick(req *weirv1.DecideRequest) *memberConn {
	if c.router == nil {
		return nil
	}
	return c.router.pick(req.GetDescriptors())
}

// pickAll returns the member every request of reqs belongs to, or nil
// (Target) when they belong to several: a caller's DecideBatch travels
// whole, so that one bad request still fails it whole and consumes nothing.
func (c *Client) pickAll(reqs []*weirv1.DecideRequest) *memberConn {
	to := c.pick(reqs[0])
	for _, r := range reqs[1:] {
		if c.pick(r) != to {
			return nil
		}
	}
	return to
}

// fallBack reports whether a call to member to should be re-sent through
// Target: the member was UNAVAILABLE (down, unreachable, or could not
// decide) while the caller still waits. The member is then skipped for a
// while and the topology re-read. A request re-sent after its answer was
// lost on the way back is charged twice: routing errs towards denying,
// never towards admitting more.
func (c *Client) fallBack(ctx context.Context, to *memberConn, err error) bool {
	if status.Code(err) != codes.Unavailable || ctx.Err() != nil || c.life.Err() != nil {
		return false
	}
	to.markDown()
	c.router.refreshSoon()
	return true
}

// observe hands an answer's ring epoch and policy version to the router.
func (c *Client) observe(epoch uint64, resp *weirv1.DecideResponse, err error) {
	if c.router != nil && err == nil {
		c.router.observe(epoch, resp.GetPolicyVersion())
	}
}

// RouteEpoch returns the ring epoch of the topology the client routes by
// (weir.v1 TopologyResponse.ring_epoch), or 0 when it routes nothing: routing
// is off, no table has arrived yet, or the nodes do not publish one. Safe for
// concurrent use.
func (c *Client) RouteEpoch() uint64 {
	if c.router == nil {
		return 0
	}
	if rt := c.router.cur.Load(); rt != nil {
		return rt.table.Epoch()
	}
	return 0
}
