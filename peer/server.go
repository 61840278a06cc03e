package peer

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	peerv1 "github.com/weirhq/weir/api/weir/peer/v1"
	regionv1 "github.com/weirhq/weir/api/weir/region/v1"
	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/grpclimit"
)

// MaxItems is the most items one DecideRequest may carry; a larger request
// is refused whole with INVALID_ARGUMENT. ClientConfig.MaxBatch cannot
// exceed it.
const MaxItems = 1024

// Register registers on s every node-to-node service this node serves:
// weir.peer.v1.Peer (Decide, and Lease when h is a LeaseHandler) answering
// with h, and the services opts add (WithRegion). Register them only on the
// node-to-node server (mutual TLS, ServerConfig's bounds), or a registrar
// wrapping it, never on the public one. Call it once, before s.Serve.
func Register(s grpc.ServiceRegistrar, h Handler, opts ...ServeOption) {
	var sv Services
	for _, o := range opts {
		o(&sv)
	}
	peerv1.RegisterPeerServer(s, &server{h: h, streams: newStreamCount(MaxStreamsPerConn), drain: sv.Drain})
	if sv.Region != nil {
		regionv1.RegisterRegionServer(s, &regionServer{h: sv.Region})
	}
}

// Services are the node-to-node services a node serves beside Peer, as
// ServeOptions set them; peertest's Network reads them the same way.
type Services struct {
	// Region answers weir.region.v1 reports; nil serves no Region.
	Region RegionHandler
	// Drain, when it ends, has every DecideStream ask its sender to close
	// it (WithDrain); nil: never.
	Drain context.Context
}

// A ServeOption adds a service to Register.
type ServeOption func(*Services)

// WithDrain has every open DecideStream, once ctx ends, ask its sender to
// close it: a stream answer with id 0 and code UNAVAILABLE, on which the
// Client closes its side (no new batch goes on it) and the stream ends
// once the batches it holds are answered. A node ends ctx just before it
// stops its peer server gracefully: peers' streams never end on their own,
// so without it the graceful stop would wait for every peer to forget this
// node, or for its timeout. A sender of an older version ignores the
// answer; its stream ends when the graceful stop times out.
func WithDrain(ctx context.Context) ServeOption {
	return func(s *Services) { s.Drain = ctx }
}

// WithRegion serves weir.region.v1.Region too, answering with h (a
// regionlink.Link); a nil h serves none, as without the option.
func WithRegion(h RegionHandler) ServeOption {
	return func(s *Services) { s.Region = h }
}

type server struct {
	peerv1.UnimplementedPeerServer
	h       Handler
	streams *streamCount    // DecideStreams open per connection
	drain   context.Context // nil: never (WithDrain)
}

// Decide converts the request, lets the Handler decide and converts back.
// A request the codec refused (ServerOptions) is INVALID_ARGUMENT. A
// Handler that breaks its contract (wrong number of results) is an INTERNAL
// error rather than a misaligned answer.
func (s *server) Decide(ctx context.Context, req *peerv1.DecideRequest) (*peerv1.DecideResponse, error) {
	if err := checkBatch(req, len(req.GetItems())); err != nil {
		return nil, err
	}
	results, err := s.decide(ctx, req.GetFromNode(), req.GetItems())
	if err != nil {
		return nil, err
	}
	return &peerv1.DecideResponse{Results: results}, nil
}

// checkBatch returns the status for a batch of n items that must not be
// decided: one the codec refused, or one of more than MaxItems items.
func checkBatch(m proto.Message, n int) error {
	if err := grpclimit.Refusal(m); err != nil {
		return err
	}
	if n > MaxItems {
		return status.Errorf(codes.InvalidArgument, "peer: %d items exceed the limit of %d", n, MaxItems)
	}
	return nil
}

// decide converts a checked batch, lets the Handler decide and converts
// back, for Decide and DecideStream alike.
func (s *server) decide(ctx context.Context, from string, batch []*peerv1.Item) ([]*peerv1.ItemResult, error) {
	n := len(batch)
	items := make([]decide.Request, n)
	for i, p := range batch {
		items[i] = itemFromProto(p)
	}
	results := s.h.HandleDecide(ctx, from, items)
	if len(results) != n {
		return nil, status.Error(codes.Internal, fmt.Sprintf("peer: handler returned %d results for %d items", len(results), n))
	}
	out := make([]*peerv1.ItemResult, n)
	for i, r := range results {
		out[i] = resultToProto(r)
	}
	return out, nil
}
