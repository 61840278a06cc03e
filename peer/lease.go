package peer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	peerv1 "github.com/weirhq/weir/api/weir/peer/v1"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/lease"
)

// LeaseAnswer is an owner's answer to one item of a lease refresh: a
// lease.Answer (whose TAT never travels), or NotOwner set (nothing was
// settled or granted), or Err set (nothing was granted).
type LeaseAnswer struct {
	lease.Answer
	// NotOwner, when set, is the node the receiver believes owns the key.
	NotOwner string
	// Err is the owner's error for this item; on the client side it wraps
	// ErrRemote.
	Err error
}

// LeaseHandler answers lease refreshes on the owner side. HandleLease must
// return exactly one answer per item of r, in order. from is the sending
// node's name plus incarnation as it reported it; r.Items[i].Peer is set
// to it. It is called concurrently. A Handler passed to Register that also
// implements LeaseHandler serves the Lease RPC.
type LeaseHandler interface {
	HandleLease(ctx context.Context, from string, r lease.Refresh) []LeaseAnswer
}

// Leaser sends one lease refresh to the node at addr and returns its
// answers, one per item in order. The error is non-nil only when no answer
// arrived. Client and peertest's in-memory network implement it.
type Leaser interface {
	Lease(ctx context.Context, addr string, r lease.Refresh) ([]LeaseAnswer, error)
}

var _ Leaser = (*Client)(nil)

// Lease sends r to the node at addr as one RPC on the connection Decide
// uses, waiting at most ClientConfig.Timeout. The items' Peer must all be
// the same (the holder's name); it travels once, as from_node.
func (c *Client) Lease(ctx context.Context, addr string, r lease.Refresh) ([]LeaseAnswer, error) {
	p, err := c.peer(addr)
	if err != nil {
		return nil, err
	}
	pc, err := p.acquire()
	if err != nil {
		return nil, err
	}
	defer p.release(pc)
	tctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	resp, err := pc.peer.Lease(tctx, leaseRequestToProto(r))
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil && tctx.Err() != nil:
		return nil, fmt.Errorf("%w: lease %s after %v: %w", ErrTimeout, addr, c.cfg.Timeout, context.DeadlineExceeded)
	case err != nil:
		return nil, fmt.Errorf("peer: lease %s: %w", addr, err)
	case resp.GetSeq() != r.Seq || len(resp.GetAnswers()) != len(r.Items):
		return nil, fmt.Errorf("peer: lease %s answered seq %d with %d answers for seq %d with %d items",
			addr, resp.GetSeq(), len(resp.GetAnswers()), r.Seq, len(r.Items))
	}
	out := make([]LeaseAnswer, len(resp.GetAnswers()))
	for i, a := range resp.GetAnswers() {
		out[i] = leaseAnswerFromProto(a)
	}
	return out, nil
}

// Lease converts the refresh, lets the handler answer and converts back.
// Without a LeaseHandler it is UNIMPLEMENTED; a refresh of more than
// MaxItems items is INVALID_ARGUMENT.
func (s *server) Lease(ctx context.Context, req *peerv1.LeaseRequest) (*peerv1.LeaseResponse, error) {
	lh, ok := s.h.(LeaseHandler)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "peer: this node grants no leases")
	}
	n := len(req.GetItems())
	if n > MaxItems {
		return nil, status.Errorf(codes.InvalidArgument, "peer: %d lease items exceed the limit of %d", n, MaxItems)
	}
	r := leaseRequestFromProto(req)
	answers := lh.HandleLease(ctx, req.GetFromNode(), r)
	if len(answers) != n {
		return nil, status.Error(codes.Internal, fmt.Sprintf("peer: handler returned %d lease answers for %d items", len(answers), n))
	}
	resp := &peerv1.LeaseResponse{Seq: req.GetSeq(), Answers: make([]*peerv1.LeaseAnswer, n)}
	for i, a := range answers {
		resp.Answers[i] = leaseAnswerToProto(a)
	}
	return resp, nil
}

func leaseRequestToProto(r lease.Refresh) *peerv1.LeaseRequest {
	req := &peerv1.LeaseRequest{Seq: r.Seq, Items: make([]*peerv1.LeaseItem, len(r.Items))}
	for i, it := range r.Items {
		req.FromNode = it.Peer
		req.Items[i] = &peerv1.LeaseItem{
			Group: it.Group, Key: it.Key,
			Limit:    &peerv1.Limit{IntervalNs: it.Limit.Interval, IntervalUs: gcra.CeilMicros(it.Limit.Interval), Burst: it.Limit.Burst},
			MaxUnits: it.Terms.Max, TtlNs: it.Terms.TTL.Nanoseconds(), Label: it.Label, DemandPerS: it.Demand,
			ReturnGrantor: it.Return.Grantor, ReturnLease: it.Return.Lease, ReturnUnspent: it.Return.Unspent,
			Scheduled: it.Scheduled,
		}
	}
	return req
}

func leaseRequestFromProto(req *peerv1.LeaseRequest) lease.Refresh {
	r := lease.Refresh{Seq: req.GetSeq(), Items: make([]lease.Request, len(req.GetItems()))}
	for i, p := range req.GetItems() {
		l := p.GetLimit()
		iv := l.GetIntervalNs()
		if iv == 0 {
			iv = usToNs(l.GetIntervalUs())
		}
		r.Items[i] = lease.Request{
			Peer: req.GetFromNode(), Group: p.GetGroup(), Key: p.GetKey(),
			Limit: gcra.Limit{Interval: iv, Burst: l.GetBurst()},
			Terms: lease.Terms{Max: p.GetMaxUnits(), TTL: time.Duration(p.GetTtlNs())},
			Label: p.GetLabel(), Demand: p.GetDemandPerS(),
			Return:    lease.Return{Grantor: p.GetReturnGrantor(), Lease: p.GetReturnLease(), Unspent: p.GetReturnUnspent()},
			Scheduled: p.GetScheduled(),
		}
	}
	return r
}

// wireOutcomes maps lease.Outcome to its wire value; the two enumerations
// list the shared outcomes in the same order.
var wireOutcomes = [...]peerv1.LeaseAnswer_Outcome{
	lease.Settled: peerv1.LeaseAnswer_SETTLED, lease.Granted: peerv1.LeaseAnswer_GRANTED,
	lease.Denied: peerv1.LeaseAnswer_DENIED, lease.Capped: peerv1.LeaseAnswer_CAPPED, lease.Busy: peerv1.LeaseAnswer_BUSY,
}

func leaseAnswerToProto(a LeaseAnswer) *peerv1.LeaseAnswer {
	switch {
	case a.NotOwner != "":
		return &peerv1.LeaseAnswer{Outcome: peerv1.LeaseAnswer_NOT_OWNER, NotOwner: a.NotOwner}
	case a.Err != nil:
		return &peerv1.LeaseAnswer{Outcome: peerv1.LeaseAnswer_FAILED, Error: a.Err.Error()}
	}
	out := &peerv1.LeaseAnswer{
		Grantor: a.Grantor, Lease: a.Lease, Units: a.Units, TtlNs: a.TTL,
		RetryAfterNs: a.RetryAfter, Credited: a.Credited, StartNs: a.Start, SpacingNs: a.Spacing,
	}
	if int(a.Outcome) < len(wireOutcomes) {
		out.Outcome = wireOutcomes[a.Outcome]
	}
	return out
}

// errUnknownOutcome answers an outcome this node does not know (a newer
// owner): nothing is spendable from it.
var errUnknownOutcome = errors.New("unknown lease outcome")

func leaseAnswerFromProto(p *peerv1.LeaseAnswer) LeaseAnswer {
	var a LeaseAnswer
	switch o := p.GetOutcome(); o {
	case peerv1.LeaseAnswer_NOT_OWNER:
		a.NotOwner = p.GetNotOwner()
		if a.NotOwner == "" {
			a.Err = remoteError("not owner, naming no owner")
		}
		return a
	case peerv1.LeaseAnswer_FAILED:
		a.Err = remoteError(p.GetError())
		return a
	default:
		i := int(o)
		if i < 0 || i >= len(wireOutcomes) {
			a.Err = remoteError(fmt.Sprintf("%v %d", errUnknownOutcome, o))
			return a
		}
		a.Outcome = lease.Outcome(i)
	}
	a.Grantor, a.Lease, a.Units, a.TTL = p.GetGrantor(), p.GetLease(), p.GetUnits(), p.GetTtlNs()
	a.RetryAfter, a.Credited = p.GetRetryAfterNs(), p.GetCredited()
	a.Start, a.Spacing = p.GetStartNs(), p.GetSpacingNs()
	return a
}
