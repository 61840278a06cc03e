package redisbackend

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// Failure classes an error from Redis falls in, for metrics and for
// deciding whether the Cluster topology may have changed. See [Classify].
const (
	// ClassNone: no error.
	ClassNone = ""
	// ClassTimeout: the call's deadline passed (Redis slow, stalled or
	// unreachable without a refusal).
	ClassTimeout = "timeout"
	// ClassUnreachable: the connection was refused, reset or closed: the
	// server is down or restarting. (go-redis retries a refused dial until
	// the deadline and then reports only the deadline, so a server that
	// is down often reads as ClassTimeout.)
	ClassUnreachable = "unreachable"
	// ClassRedirect: MOVED or ASK left over after go-redis's redirects (a
	// slot moving, or a client map far behind).
	ClassRedirect = "redirect"
	// ClassReadOnly: READONLY, a write reached a replica (a master demoted
	// by a failover, still in this client's map).
	ClassReadOnly = "readonly"
	// ClassClusterDown: CLUSTERDOWN or MASTERDOWN, the slot has no master
	// (between a master's death and its replica's promotion).
	ClassClusterDown = "clusterdown"
	// ClassTryAgain: TRYAGAIN, a multi-key call during a slot migration
	// whose keys are split between the two nodes.
	ClassTryAgain = "tryagain"
	// ClassLoading: LOADING, the server is loading its data set.
	ClassLoading = "loading"
	// ClassOther: any other error (a script error, a bad reply).
	ClassOther = "other"
)

// Classify names the failure class of an error returned by a Backend
// method (wrapped or not): one of the Class constants.
func Classify(err error) string {
	switch {
	case err == nil:
		return ClassNone
	case unreachable(err):
		return ClassUnreachable
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return ClassTimeout
	case redis.IsReadOnlyError(err):
		return ClassReadOnly
	case redis.IsClusterDownError(err) || redis.IsMasterDownError(err):
		return ClassClusterDown
	case redis.IsTryAgainError(err):
		return ClassTryAgain
	case redis.IsLoadingError(err):
		return ClassLoading
	}
	if _, ok := redis.IsMovedError(err); ok {
		return ClassRedirect
	}
	if _, ok := redis.IsAskError(err); ok {
		return ClassRedirect
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ClassTimeout
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, redis.ErrClosed) {
		return ClassUnreachable
	}
	return ClassOther
}

// unreachable reports a refused or reset connection, checked before
// timeouts: go-redis retries a refused dial until the deadline and then
// reports both.
func unreachable(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH)
}

// topologySuspect reports whether err hints that the Cluster's slot map
// changed: a node gone or refusing, a demoted master, a slot without a
// master or moving. Timeouts count too: a master killed without a reset
// (power, network) only times out.
func topologySuspect(err error) bool {
	switch Classify(err) {
	case ClassTimeout, ClassUnreachable, ClassRedirect, ClassReadOnly, ClassClusterDown, ClassTryAgain, ClassLoading:
		return true
	}
	return false
}

// noteError asks a Cluster client to reload its slot map, in the
// background, when err suggests the map is stale, and returns err.
//
// Why: go-redis reloads the map on MOVED, ASK and READONLY, and otherwise
// only every ClusterStateReloadInterval (60s by default). A master that
// dies refuses connections or times out and sends no MOVED, so without
// this every call to its slots fails for up to a minute after Redis
// Cluster has promoted its replica. ReloadState is asynchronous and
// coalesced (one reload at a time, at most one every 200ms), so calling
// it on every failure costs nothing on the request path.
func (b *Backend) noteError(err error) error {
	if err == nil {
		return nil
	}
	if cc, ok := b.client.(*redis.ClusterClient); ok && topologySuspect(err) {
		cc.ReloadState(context.Background())
	}
	return err
}
