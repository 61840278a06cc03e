package grpclimit

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// Limits bounds what one gRPC server accepts. server.GRPCConfig and
// peer.ServerConfig are defined as Limits: they differ only in their
// defaults, the largest valid request Validate holds them to, and the Codec
// their ServerOptions install.
type Limits struct {
	// MaxRecvMsgBytes is the largest message the server reads; a larger
	// one is refused with RESOURCE_EXHAUSTED before it is read.
	MaxRecvMsgBytes int
	// MaxConcurrentStreams bounds the calls in flight on one connection.
	MaxConcurrentStreams uint32
	// KeepaliveMinTime is the shortest interval between client pings the
	// server tolerates; a client pinging more often is disconnected.
	KeepaliveMinTime time.Duration
	// KeepaliveTime and KeepaliveTimeout: the server pings a connection
	// idle for KeepaliveTime and closes it without an answer within
	// KeepaliveTimeout.
	KeepaliveTime    time.Duration
	KeepaliveTimeout time.Duration
	// MaxConnectionIdle closes a connection with no call for this long.
	MaxConnectionIdle time.Duration
}

// DefaultLimits returns Limits for a server whose largest message is
// maxRecvMsgBytes and which runs up to maxConcurrentStreams calls per
// connection, with the keepalive bounds every weir server shares: client
// pings no more often than every 10 s, a server ping after 1 min idle with
// a 20 s timeout, idle connections closed after 15 min.
func DefaultLimits(maxRecvMsgBytes int, maxConcurrentStreams uint32) Limits {
	return Limits{
		MaxRecvMsgBytes:      maxRecvMsgBytes,
		MaxConcurrentStreams: maxConcurrentStreams,
		KeepaliveMinTime:     10 * time.Second,
		KeepaliveTime:        time.Minute,
		KeepaliveTimeout:     20 * time.Second,
		MaxConnectionIdle:    15 * time.Minute,
	}
}

// Validate reports every problem with l, given the largest valid request
// the server must be able to read. It changes nothing.
func (l Limits) Validate(minRecvMsgBytes int) error {
	var errs []error
	if l.MaxRecvMsgBytes < minRecvMsgBytes {
		errs = append(errs, fmt.Errorf("max recv msg bytes %d is below the largest valid request, %d", l.MaxRecvMsgBytes, minRecvMsgBytes))
	}
	if l.MaxConcurrentStreams == 0 {
		errs = append(errs, errors.New("max concurrent streams must be positive"))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"keepalive min time", l.KeepaliveMinTime}, {"keepalive time", l.KeepaliveTime},
		{"keepalive timeout", l.KeepaliveTimeout}, {"max connection idle", l.MaxConnectionIdle},
	} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s %v must be positive", d.name, d.v))
		}
	}
	return errors.Join(errs...)
}

// StreamWindowBytes is the static HTTP/2 window of every stream: the most a
// stream buffers before its handler asks for its request (gRPC then opens
// the window to the request's length). The default, dynamic windows grow
// to several MiB per stream on a fast link, so calls waiting at a Gate
// would hold that much each. 64 KiB is the smallest gRPC allows.
const StreamWindowBytes = 64 << 10

// ConnWindowBytes is the static window of a connection. gRPC returns
// connection window as data arrives (the stream windows bound what is
// held), so it costs no memory; it is large so that one connection's
// streams are not held back on a link with a long round trip.
const ConnWindowBytes = 16 << 20

// ServerOptions returns the grpc.ServerOptions that apply l, with static
// flow-control windows (StreamWindowBytes, ConnWindowBytes), and install
// codec, the server's Codec, in place of gRPC's own. l must pass Validate.
func (l Limits) ServerOptions(codec *Codec) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(codec),
		grpc.StaticStreamWindowSize(StreamWindowBytes),
		grpc.StaticConnWindowSize(ConnWindowBytes),
		grpc.MaxRecvMsgSize(l.MaxRecvMsgBytes),
		grpc.MaxConcurrentStreams(l.MaxConcurrentStreams),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: l.KeepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time: l.KeepaliveTime, Timeout: l.KeepaliveTimeout, MaxConnectionIdle: l.MaxConnectionIdle,
		}),
	}
}
