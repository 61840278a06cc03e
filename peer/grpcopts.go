package peer

import (
	"fmt"
	"time"

	"google.golang.org/grpc"

	"github.com/weirhq/weir/grpclimit"
)

// Wire sizes of forwarded work. The largest Item the default Validator
// accepts has DefaultMaxKeys keys of DefaultMaxKeyBytes (25,448) bytes, as
// many limits, and a group no longer than a key (its tag is inside every
// key). A key is a tag byte, a 3-byte length and the key; a Limit is a tag,
// a 1-byte length and two 11-byte varint fields; cost and now are 11 bytes
// each, strict and debt 2.
const (
	maxKeyFieldBytes   = 1 + 3 + DefaultMaxKeyBytes
	maxLimitFieldBytes = 1 + 1 + 2*(1+10)
	// MaxItemBytes is the encoded size of the largest Item the default
	// Validator accepts: 6,547,334 bytes.
	MaxItemBytes = maxKeyFieldBytes + DefaultMaxKeys*(maxKeyFieldBytes+maxLimitFieldBytes) + 2*(1+10) + 2*2
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
// server.GRPCConfig does for the public one. ServerOptions turns it into
// grpc.ServerOptions.
type ServerConfig struct {
	// MaxRecvMsgBytes is the largest request read; a larger one is refused
	// with RESOURCE_EXHAUSTED before it is read. At least MaxRequestBytes.
	MaxRecvMsgBytes int
	// MaxConcurrentStreams bounds the RPCs in flight on one connection.
	// A sender runs ClientConfig.MaxInFlight RPCs per peer (1 by default);
	// more wait for a stream.
	MaxConcurrentStreams uint32
	// KeepaliveMinTime is the shortest interval between client pings the
	// server tolerates; a client pinging more often is disconnected.
	KeepaliveMinTime time.Duration
	// KeepaliveTime and KeepaliveTimeout: the server pings a connection
	// idle for KeepaliveTime and closes it without an answer within
	// KeepaliveTimeout.
	KeepaliveTime    time.Duration
	KeepaliveTimeout time.Duration
	// MaxConnectionIdle closes a connection with no RPC for this long (the
	// client reconnects on its next forward).
	MaxConnectionIdle time.Duration
}

// DefaultServerConfig returns the defaults: MaxRecvMsgBytes
// MaxRequestBytes, 64 streams per connection, pings no more often than
// every 10 s, a server ping after 1 min idle with a 20 s timeout, idle
// connections closed after 15 min.
func DefaultServerConfig() ServerConfig {
	return ServerConfig{
		MaxRecvMsgBytes:      MaxRequestBytes,
		MaxConcurrentStreams: 64,
		KeepaliveMinTime:     10 * time.Second,
		KeepaliveTime:        time.Minute,
		KeepaliveTimeout:     20 * time.Second,
		MaxConnectionIdle:    15 * time.Minute,
	}
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
	return append(grpclimit.Limits(c).ServerOptions(), grpc.ForceServerCodecV2(newCodec()))
}
