package peer

import (
	"fmt"

	"google.golang.org/grpc"

	"github.com/weirhq/weir/grpclimit"
)

// Wire sizes of forwarded work. The largest item the default intake.Validator
// accepts has DefaultMaxKeys keys of DefaultMaxKeyBytes (25,448) bytes, as
// many limits, and a group no longer than a key (its tag is inside every
// key). A key is a tag byte, a 3-byte length and the key; a Limit is a tag,
// a 1-byte length and two 11-byte varint fields; cost and now are 11 bytes
// each, strict, debt and reserve 2; an op is a tag, a 1-byte length, its
// kind (6), id (18), ttl and actual (11 each).
const (
	maxKeyFieldBytes   = 1 + 3 + DefaultMaxKeyBytes
	maxLimitFieldBytes = 1 + 1 + 2*(1+10)
	maxOpFieldBytes    = 1 + 1 + (1 + 5) + (1 + 1 + 16) + 2*(1+10)
	// MaxItemBytes is the encoded size of the largest item the default
	// Validator accepts: 6,547,384 bytes.
	MaxItemBytes = maxKeyFieldBytes + DefaultMaxKeys*(maxKeyFieldBytes+maxLimitFieldBytes) + 2*(1+10) + 3*2 + maxOpFieldBytes
	// MaxRequestBytes bounds one DecideRequest on the wire. MaxItems
	// maximal items (6.7 GB) would be no bound at all, so the Client cuts
	// its batches by size as well as by count: it never sends more than
	// this, and the largest valid item (framed in 5 bytes) fits with room
	// for the sender's name (MaxNodeNameBytes). The server reads no larger
	// message (ServerConfig.MaxRecvMsgBytes).
	MaxRequestBytes = 16 << 20
	// MaxNodeNameBytes bounds ClientConfig.LocalName, sent in every
	// request.
	MaxNodeNameBytes = 1024
)

// The largest valid item must fit in one request.
var _ = [MaxRequestBytes - (1 + 4 + MaxItemBytes) - (1 + 2 + MaxNodeNameBytes)]struct{}{}

// ServerConfig bounds what the peer gRPC server accepts, as
// server.GRPCConfig does for the public one; its fields are grpclimit's.
// MaxRecvMsgBytes must be at least MaxRequestBytes. A sender runs
// ClientConfig.MaxInFlight RPCs per peer (1 by default); beyond
// MaxConcurrentStreams, more wait for a stream. A connection closed after
// MaxConnectionIdle is dialled again by the client on its next forward.
// ServerOptions turns it into grpc.ServerOptions.
type ServerConfig grpclimit.Limits

// DefaultServerConfig returns the defaults: MaxRecvMsgBytes
// MaxRequestBytes, 64 streams per connection, and grpclimit.DefaultLimits'
// keepalive bounds.
func DefaultServerConfig() ServerConfig {
	return ServerConfig(grpclimit.DefaultLimits(MaxRequestBytes, 64))
}

// Validate reports every problem with c. It changes nothing.
func (c ServerConfig) Validate() error {
	if err := grpclimit.Limits(c).Validate(MaxRequestBytes); err != nil {
		return fmt.Errorf("peer: server: %w", err)
	}
	return nil
}

// ServerOptions returns the options that apply c, including the codec that
// answers a malformed or oversized request with INVALID_ARGUMENT instead
// of INTERNAL (see codec.go). Pass them to grpc.NewServer with the
// credentials. c must pass Validate.
func (c ServerConfig) ServerOptions() []grpc.ServerOption {
	return grpclimit.Limits(c).ServerOptions(newCodec())
}
