package server

import (
	"fmt"
	"time"

	"google.golang.org/grpc"

	"github.com/weirhq/weir/grpclimit"
	"github.com/weirhq/weir/limiter"
)

// Wire sizes of the largest valid requests, from the API limits
// (limiter.MaxDescriptors, limiter.MaxDescriptorBytes, limiter.MaxBatch).
// One descriptor is a map entry: tag (1 byte) + entry length (2) + key
// (tag 1 + length 2 + 256 bytes) + value (1 + 2 + 256) = 521 bytes; the
// cost is a tag and a 10-byte varint. A request in a batch adds its tag and
// a 3-byte length.
const (
	maxDescriptorEntryBytes = 1 + 2 + 2*(1+2+limiter.MaxDescriptorBytes)
	// MaxDecideRequestBytes is the encoded size of the largest valid
	// DecideRequest: 32 descriptors of 521 bytes and a cost, 16,683 bytes.
	MaxDecideRequestBytes = limiter.MaxDescriptors*maxDescriptorEntryBytes + 1 + 10
	// MaxDecideBatchRequestBytes is the encoded size of the largest valid
	// DecideBatchRequest: 1,000 such requests of 4 + 16,683 bytes,
	// 16,687,000 bytes (about 16 MiB).
	MaxDecideBatchRequestBytes = limiter.MaxBatch * (1 + 3 + MaxDecideRequestBytes)
)

// GRPCConfig bounds what one gRPC server accepts. ServerOptions turns it
// into grpc.ServerOptions.
type GRPCConfig struct {
	// MaxRecvMsgBytes is the largest message the server reads; a larger
	// one is refused with RESOURCE_EXHAUSTED before it is read. The
	// default, MaxDecideBatchRequestBytes plus 1 KiB, admits every valid
	// request. Per message type the codec refuses sooner: a DecideRequest
	// over MaxDecideRequestBytes is RESOURCE_EXHAUSTED before decoding.
	MaxRecvMsgBytes int
	// MaxConcurrentStreams bounds the calls in flight on one connection.
	MaxConcurrentStreams uint32
	// KeepaliveMinTime is the shortest interval between client pings the
	// server tolerates; a client pinging more often is disconnected
	// (GOAWAY too_many_pings).
	KeepaliveMinTime time.Duration
	// KeepaliveTime and KeepaliveTimeout: the server pings a connection
	// idle for KeepaliveTime and closes it if no answer comes within
	// KeepaliveTimeout, so dead peers do not hold connections.
	KeepaliveTime    time.Duration
	KeepaliveTimeout time.Duration
	// MaxConnectionIdle closes a connection with no call for this long.
	MaxConnectionIdle time.Duration
}

// DefaultGRPCConfig returns the defaults: MaxRecvMsgBytes
// MaxDecideBatchRequestBytes + 1 KiB, 256 streams per connection, pings no
// more often than every 10 s, a server ping after 1 min idle with a 20 s
// timeout, idle connections closed after 15 min.
func DefaultGRPCConfig() GRPCConfig {
	return GRPCConfig{
		MaxRecvMsgBytes:      MaxDecideBatchRequestBytes + 1<<10,
		MaxConcurrentStreams: 256,
		KeepaliveMinTime:     10 * time.Second,
		KeepaliveTime:        time.Minute,
		KeepaliveTimeout:     20 * time.Second,
		MaxConnectionIdle:    15 * time.Minute,
	}
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
	return append(grpclimit.Limits(c).ServerOptions(), grpc.ForceServerCodecV2(newCodec()))
}
