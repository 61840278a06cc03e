package regionlink

import (
	"context"
	"errors"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	regionv1 "github.com/weirhq/weir/api/weir/region/v1"
	"github.com/weirhq/weir/region"
)

// Handler answers reports (*Link implements it).
type Handler interface {
	Handle(ctx context.Context, r region.Report, forwarded bool) (region.Reply, error)
}

var _ Handler = (*Link)(nil)

// Register registers weir.region.v1.Region on s, answering with h. Register
// it only on the node-to-node server (--peer-addr, mutual TLS), or a
// registrar wrapping it, never on the public one. Call it before s.Serve.
func Register(s grpc.ServiceRegistrar, h Handler) {
	regionv1.RegisterRegionServer(s, &server{h: h})
}

type server struct {
	regionv1.UnimplementedRegionServer
	h Handler
}

// Report answers INVALID_ARGUMENT, changing nothing, for a report the
// handler refuses (region.ErrInvalidReport).
func (s *server) Report(ctx context.Context, req *regionv1.ReportRequest) (*regionv1.ReportReply, error) {
	reply, err := s.h.Handle(ctx, reportFromProto(req), req.GetForwarded())
	switch {
	case errors.Is(err, region.ErrInvalidReport):
		return nil, status.Error(codes.InvalidArgument, err.Error())
	case err != nil:
		return nil, status.Error(codes.Internal, err.Error())
	}
	return replyToProto(reply), nil
}

// Client sends reports over weir.region.v1, one connection per address,
// kept until Close. It implements Sender; safe for concurrent use.
type Client struct {
	creds credentials.TransportCredentials
	mu    struct {
		sync.Mutex
		conns  map[string]*grpc.ClientConn
		closed bool
	}
}

var _ Sender = (*Client)(nil)

// NewClient returns a Client that dials with creds (the node's peer mTLS
// credentials); nil dials in plaintext.
func NewClient(creds credentials.TransportCredentials) *Client {
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	c := &Client{creds: creds}
	c.mu.conns = make(map[string]*grpc.ClientConn)
	return c
}

// Send sends r to the node at addr within ctx's deadline. A call that
// times out or finds the node unavailable closes the connection, so the
// next one dials afresh: after a cut between regions heals, a connection
// whose packets were dropped can stall for many seconds of TCP
// retransmission backoff, and the grants would wait for it.
func (c *Client) Send(ctx context.Context, addr string, r region.Report, forwarded bool) (region.Reply, error) {
	conn, err := c.conn(addr)
	if err != nil {
		return region.Reply{}, err
	}
	req := reportToProto(r)
	req.Forwarded = forwarded
	resp, err := regionv1.NewRegionClient(conn).Report(ctx, req)
	if code := status.Code(err); code == codes.DeadlineExceeded || code == codes.Unavailable {
		c.drop(addr, conn)
	}
	if err != nil {
		return region.Reply{}, err
	}
	return replyFromProto(resp), nil
}

// drop closes conn and forgets it, unless addr has a newer connection.
func (c *Client) drop(addr string, conn *grpc.ClientConn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.conns[addr] == conn {
		delete(c.mu.conns, addr)
		conn.Close()
	}
}

func (c *Client) conn(addr string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return nil, errors.New("regionlink: client closed")
	}
	if cc := c.mu.conns[addr]; cc != nil {
		return cc, nil
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(c.creds))
	if err != nil {
		return nil, err
	}
	c.mu.conns[addr] = cc
	return cc, nil
}

// Close closes every connection. Idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.closed = true
	var errs []error
	for addr, cc := range c.mu.conns {
		errs = append(errs, cc.Close())
		delete(c.mu.conns, addr)
	}
	return errors.Join(errs...)
}

func reportFromProto(p *regionv1.ReportRequest) region.Report {
	r := region.Report{From: p.GetFrom(), Reporter: p.GetReporter(), Home: p.GetHome(), Seq: p.GetSeq(),
		Items: make([]region.Demand, len(p.GetItems()))}
	for i, it := range p.GetItems() {
		r.Items[i] = region.Demand{Key: it.GetKey(), Demand: it.GetDemand(), Ack: it.GetAck()}
	}
	return r
}

func reportToProto(r region.Report) *regionv1.ReportRequest {
	p := &regionv1.ReportRequest{From: r.From, Reporter: r.Reporter, Home: r.Home, Seq: r.Seq,
		Items: make([]*regionv1.Demand, len(r.Items))}
	for i, it := range r.Items {
		p.Items[i] = &regionv1.Demand{Key: it.Key, Demand: it.Demand, Ack: it.Ack}
	}
	return p
}

func replyFromProto(p *regionv1.ReportReply) region.Reply {
	r := region.Reply{Home: p.GetHome(), To: p.GetTo(), Reporter: p.GetReporter(), Seq: p.GetSeq(),
		Grants: make([]region.Grant, len(p.GetGrants()))}
	for i, g := range p.GetGrants() {
		r.Grants[i] = region.Grant{Key: g.GetKey(), Share: region.Share(g.GetShare()), TTL: g.GetTtlNs()}
	}
	return r
}

func replyToProto(r region.Reply) *regionv1.ReportReply {
	p := &regionv1.ReportReply{Home: r.Home, To: r.To, Reporter: r.Reporter, Seq: r.Seq,
		Grants: make([]*regionv1.Grant, len(r.Grants))}
	for i, g := range r.Grants {
		p.Grants[i] = &regionv1.Grant{Key: g.Key, Share: int64(g.Share), TtlNs: g.TTL}
	}
	return p
}
