package server

import (
	"fmt"

	"google.golang.org/grpc"

	"github.com/weirhq/weir/grpclimit"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/ticket"
)

// Wire sizes of the largest valid requests, from the API limits
// (limiter.MaxDescriptors, limiter.MaxDescriptorBytes, limiter.MaxBatch).
// One descriptor is a map entry: tag (1 byte) + entry length (2) + key
// (tag 1 + length 2 + 256 bytes) + value (1 + 2 + 256) = 521 bytes; the
// cost is a tag and a 10-byte varint, reserve a tag and a 1. A request in a
// batch adds its tag and a 3-byte length.
const (
	maxDescriptorEntryBytes = 1 + 2 + 2*(1+2+limiter.MaxDescriptorBytes)
	// MaxDecideRequestBytes is the encoded size of the largest valid
	// DecideRequest: 32 descriptors of 521 bytes, a cost and reserve,
	// 16,685 bytes.
	MaxDecideRequestBytes = limiter.MaxDescriptors*maxDescriptorEntryBytes + 1 + 10 + 2
	// MaxDecideBatchRequestBytes is the encoded size of the largest valid
	// DecideBatchRequest: 1,000 such requests of 4 + 16,685 bytes,
	// 16,689,000 bytes (about 16 MiB).
	MaxDecideBatchRequestBytes = limiter.MaxBatch * (1 + 3 + MaxDecideRequestBytes)
)

// MaxOpRequestBytes is the encoded size of the largest valid
// ReleaseRequest, RenewRequest or SettleRequest: a token of
// ticket.MaxBytes (tag, 3-byte length) and a ttl (tag, length, two 10-byte
// varints with their tags) or an actual cost (tag, 10-byte varint),
// rounded up. A larger one is RESOURCE_EXHAUSTED before it is decoded.
const MaxOpRequestBytes = 1 + 3 + ticket.MaxBytes + 32

// GRPCConfig bounds what the public gRPC server accepts, as
// peer.ServerConfig does for the node-to-node one; its fields are
// grpclimit's. MaxRecvMsgBytes must be at least MaxDecideBatchRequestBytes;
// per message type the codec refuses sooner: a DecideRequest over
// MaxDecideRequestBytes is RESOURCE_EXHAUSTED before decoding. Keepalive
// enforcement disconnects a client pinging too often (GOAWAY
// too_many_pings), and server pings close connections to dead clients.
// ServerOptions turns it into grpc.ServerOptions.
type GRPCConfig grpclimit.Limits

// DefaultGRPCConfig returns the defaults: MaxRecvMsgBytes
// MaxDecideBatchRequestBytes + 1 KiB (every valid request), 256 streams per
// connection, and grpclimit.DefaultLimits' keepalive bounds.
func DefaultGRPCConfig() GRPCConfig {
	return GRPCConfig(grpclimit.DefaultLimits(MaxDecideBatchRequestBytes+1<<10, 256))
}

// Validate reports every problem with c. It changes nothing.
func (c GRPCConfig) Validate() error {
	if err := grpclimit.Limits(c).Validate(MaxDecideBatchRequestBytes); err != nil {
		return fmt.Errorf("server: grpc: %w", err)
	}
	return nil
}

// ServerOptions returns the options that apply c, including the codec that
// refuses oversized and malformed weir.v1 requests with RESOURCE_EXHAUSTED
// and INVALID_ARGUMENT (see NewGRPCService). Pass them to grpc.NewServer
// with any others (credentials). c must pass Validate.
func (c GRPCConfig) ServerOptions() []grpc.ServerOption {
	return grpclimit.Limits(c).ServerOptions(newCodec())
}
