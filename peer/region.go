package peer

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	regionv1 "github.com/weirhq/weir/api/weir/region/v1"
	"github.com/weirhq/weir/region"
)

// RegionHandler answers the reports of weir.region.v1 (package region) on
// the owner side: regionlink.Link implements it. Handle returns an error
// wrapping region.ErrInvalidReport, having changed nothing, for a report
// it refuses. It is called concurrently. Serve it with Register and
// WithRegion.
type RegionHandler interface {
	Handle(ctx context.Context, r region.Report, forwarded bool) (region.Reply, error)
}

// Reporter sends one region report to the node at addr and returns its
// reply; forwarded marks a part of a report that a node of the key's home
// region passes to the key's owner. Client and peertest's in-memory
// network implement it, and it is regionlink.Sender's method, so either
// can be a regionlink.Link's Sender.
type Reporter interface {
	Send(ctx context.Context, addr string, r region.Report, forwarded bool) (region.Reply, error)
}

var _ Reporter = (*Client)(nil)

// Send sends a region report to the node at addr as one weir.region.v1
// Report RPC on the connection Decide and Lease use, within ctx's deadline
// only: a report crosses regions, farther than a forward, and its caller
// (regionlink.Config.CallTimeout) bounds it, not ClientConfig.Timeout.
//
// A call that times out or finds the node unavailable redials: the next
// RPC to addr, of any kind, goes over a fresh connection, while those still
// running on the old one finish there (weir_peer_redials_total). After a
// cut between regions heals, a connection whose packets were dropped can
// stall for many seconds of TCP retransmission backoff, and the grants
// would wait for it.
//
// Errors: ErrClosed or ErrForgotten, or the RPC's error wrapped (its gRPC
// code is INVALID_ARGUMENT for a report the node refused).
func (c *Client) Send(ctx context.Context, addr string, r region.Report, forwarded bool) (region.Reply, error) {
	p, err := c.peer(addr)
	if err != nil {
		return region.Reply{}, err
	}
	pc, err := p.acquire()
	if err != nil {
		return region.Reply{}, err
	}
	defer p.release(pc)
	req := reportToProto(r)
	req.Forwarded = forwarded
	resp, err := pc.region.Report(ctx, req)
	if code := status.Code(err); code == codes.DeadlineExceeded || code == codes.Unavailable {
		p.redial(pc)
	}
	if err != nil {
		return region.Reply{}, fmt.Errorf("peer: region report to %s: %w", addr, err)
	}
	return replyFromProto(resp), nil
}

// regionServer serves weir.region.v1.Region with a RegionHandler.
type regionServer struct {
	regionv1.UnimplementedRegionServer
	h RegionHandler
}

// Report answers INVALID_ARGUMENT, changing nothing, for a report the
// handler refuses (region.ErrInvalidReport), DEADLINE_EXCEEDED or CANCELLED
// when the handler gave up with the call's context (so the sender redials
// as for a deadline it saw itself), and INTERNAL for any other error.
func (s *regionServer) Report(ctx context.Context, req *regionv1.ReportRequest) (*regionv1.ReportReply, error) {
	reply, err := s.h.Handle(ctx, reportFromProto(req), req.GetForwarded())
	switch {
	case errors.Is(err, region.ErrInvalidReport):
		return nil, status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return nil, status.FromContextError(err).Err()
	case err != nil:
		return nil, status.Error(codes.Internal, err.Error())
	}
	return replyToProto(reply), nil
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
