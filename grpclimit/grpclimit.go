package grpclimit

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// Limits bounds what one gRPC server accepts. server.GRPCConfig and
// peer.ServerConfig have the same fields and convert to it.
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

// ServerOptions returns the grpc.ServerOptions that apply l. l must pass
// Validate.
func (l Limits) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(l.MaxRecvMsgBytes),
		grpc.MaxConcurrentStreams(l.MaxConcurrentStreams),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: l.KeepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time: l.KeepaliveTime, Timeout: l.KeepaliveTimeout, MaxConnectionIdle: l.MaxConnectionIdle,
		}),
	}
}
