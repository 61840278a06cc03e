package peer

import (
	"context"
	"errors"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
)

// Errors returned by Client.Decide. Errors from the transport (gRPC status
// errors) are returned wrapped and are not listed here.
var (
	// ErrClosed is returned by calls made after Client.Close and by calls
	// still pending when it ran.
	ErrClosed = errors.New("peer: client closed")
	// ErrForgotten is returned by calls still pending for a peer when
	// Client.Forget removed it.
	ErrForgotten = errors.New("peer: peer forgotten")
	// ErrTimeout is returned when ClientConfig.Timeout passed before the
	// owner answered while the caller's own context was still live. It wraps
	// context.DeadlineExceeded as well.
	ErrTimeout = errors.New("peer: forward timed out")
	// ErrQueueFull is returned at once when ClientConfig.MaxQueue items
	// already wait for the peer.
	ErrQueueFull = errors.New("peer: queue to the peer is full")
	// ErrRemote wraps the error text an owner returned for one item, in
	// Result.Err.
	ErrRemote = errors.New("peer: owner error")
)

// Result is the owner's answer for one forwarded decide.Request. Exactly one of three shapes:
// a decision (Overall and Results, one per limit), NotOwner set (nothing was
// decided), or Err set (nothing was committed).
type Result struct {
	// Overall is the aggregate decision over all limits.
	Overall gcra.Result
	// Results holds one result per limit, in the item's order.
	Results []gcra.Result
	// NotOwner, when set, is the node the receiver believes owns the group.
	NotOwner string
	// Err is the owner's error for this item. On the client side it wraps
	// ErrRemote and carries the owner's message.
	Err error
	// Reason, with Err, is the failure-policy reason the owner met
	// (redis_unavailable, state_load_failed), so the sender can name the
	// real cause of its fallback; empty for other errors.
	Reason string
	// Grant is the owner's answer beyond the gcra results (decide.Grant:
	// permit and reservation tokens, in-flight counts, an op's outcome)
	// for an item that has concurrency keys, Reserve or Op; nil for a
	// plain decision. The owner's handler fills it, the wire carries it.
	Grant *decide.Grant
}

// Handler decides forwarded items on the owner side. HandleDecide must
// return exactly one Result per item, in order: a decision for the groups
// this node owns, Result.NotOwner for the others. from is the sending
// node's name as it reported it. It is called concurrently.
type Handler interface {
	HandleDecide(ctx context.Context, from string, items []decide.Request) []Result
}

// Forwarder sends one item to the node at addr and returns its answer. The
// error is non-nil only when no answer arrived (transport failure, timeout,
// closed); an answer that is an owner error or a not-owner reply comes back
// in Result with a nil error. Client and peertest's in-memory network
// implement it; consumers should depend on this interface.
type Forwarder interface {
	Decide(ctx context.Context, addr string, it decide.Request) (Result, error)
}

var _ Forwarder = (*Client)(nil)
