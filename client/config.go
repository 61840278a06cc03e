package client

import (
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/clock"
)

// Defaults used by DefaultConfig and for zero fields of a Config.
const (
	// DefaultMaxBatch is the batch size used when Config.MaxBatch is 0.
	DefaultMaxBatch = 100
	// DefaultTimeout is the per-call timeout used when Config.Timeout is 0.
	DefaultTimeout = 100 * time.Millisecond
	// ServerMaxBatch is the most requests a weir node accepts in one
	// DecideBatch call; a larger batch fails whole with INVALID_ARGUMENT.
	ServerMaxBatch = 1000
	// DefaultRouteRefresh is how often a routing client re-reads the
	// topology when Config.RouteRefresh is 0.
	DefaultRouteRefresh = 5 * time.Second
	// DefaultMaxRouteConns is the connection bound of a routing client
	// when Config.MaxRouteConns is 0.
	DefaultMaxRouteConns = 64
)

// Config describes a Client. The zero value of every field except Target is
// usable and means the documented default.
type Config struct {
	// Target is the gRPC target of a weir node or a load balancer in front
	// of several, e.g. "127.0.0.1:8081" or "dns:///weir.internal:8081".
	Target string

	// BatchWindow is how long Decide holds a request to coalesce it with
	// other concurrent Decide calls into one DecideBatch RPC. 0 disables
	// batching: each Decide is its own RPC. A larger window saves RPCs under
	// load and adds up to the window to every Decide's latency; a few
	// hundred microseconds is a good start for busy callers.
	BatchWindow time.Duration

	// MaxBatch flushes a coalesced batch as soon as it holds this many
	// requests, without waiting for the window. 0 means DefaultMaxBatch; it
	// must not exceed ServerMaxBatch.
	MaxBatch int

	// Timeout bounds every call (Decide, DecideBatch) on top of the caller's
	// context: the earlier of the two deadlines applies. 0 means
	// DefaultTimeout. A rate limiter sits in the request path, so keep this
	// short and decide what to do on error (fail open or closed) yourself.
	Timeout time.Duration

	// TLS, when non-nil, connects over TLS (see TLSConfig); nil connects in
	// plaintext, fit only for loopback or a network you trust. The files
	// are re-read when they change, so certificates rotate without a
	// restart.
	TLS *TLSConfig
	// Route sends each request straight to its group's owner, saving the
	// hop from the node that receives it to the owner. The client reads
	// the cluster's topology (members' public addresses, the partition
	// table and the policy's group rules) from Target, opens one
	// connection per member (with the same TLS and dial options as
	// Target's) and falls back to Target for requests it cannot place,
	// while the ring changes, and when a member does not answer. Answers
	// are the same either way: any node decides any request. Leave it off
	// when the nodes' own addresses are not reachable from the client
	// (behind NAT or a proxy); Target is then the only address used.
	Route bool
	// RouteRefresh is how often a routing client re-reads the topology
	// when nothing has told it the ring changed. 0 means
	// DefaultRouteRefresh.
	RouteRefresh time.Duration
	// MaxRouteConns bounds the member connections of a routing client;
	// groups of members beyond it go to Target. 0 means
	// DefaultMaxRouteConns.
	MaxRouteConns int
	// Leases, when set, holds leases of the policy's leasable limits in
	// this process (see LeaseConfig and the package doc, "Client-side
	// leases"): a hot leasable key is decided here without an RPC, as
	// exactly as at a node. Descriptors that are not leasable, and those
	// a lease cannot decide now, go over Decide as without it. The node
	// must serve weir.v1.Leases; one that does not answers UNIMPLEMENTED
	// and the client decides everything over Decide. nil: off.
	Leases *LeaseConfig

	// Clock drives the renewers of the permits Acquire holds; nil is
	// clock.Real(). Tests pass a clocktest.Manual.
	Clock clock.Clock
	// OnPermitError, when set, is told when a permit held by Acquire could
	// not be renewed or released. err wraps ErrPermitLost when the owner
	// answered that it holds no such permit (expired, or lost with a
	// crashed owner): renewing has stopped and the slots may be held by
	// others now. Any other err is the failed call's: a renew is tried
	// again at its next tick, a release is not (the slots come back when
	// the permit's TTL ends). descriptors are the Acquire's (a copy the
	// callee may keep). It runs on the client's goroutines or in release;
	// it must be safe for concurrent use and return promptly.
	OnPermitError func(descriptors map[string]string, err error)
}

// DefaultConfig returns a Config with batching and routing off, MaxBatch
// DefaultMaxBatch, Timeout DefaultTimeout and the routing defaults. The
// caller must set Target.
func DefaultConfig() Config {
	return Config{
		MaxBatch:      DefaultMaxBatch,
		Timeout:       DefaultTimeout,
		RouteRefresh:  DefaultRouteRefresh,
		MaxRouteConns: DefaultMaxRouteConns,
	}
}

// Validate reports the first problem with c, or nil. It changes nothing.
func (c Config) Validate() error {
	switch {
	case c.Target == "":
		return errors.New("client: config: empty target")
	case c.BatchWindow < 0:
		return fmt.Errorf("client: config: negative batch window %v", c.BatchWindow)
	case c.MaxBatch < 0:
		return fmt.Errorf("client: config: negative max batch %d", c.MaxBatch)
	case c.MaxBatch > ServerMaxBatch:
		return fmt.Errorf("client: config: max batch %d exceeds the server limit %d", c.MaxBatch, ServerMaxBatch)
	case c.Timeout < 0:
		return fmt.Errorf("client: config: negative timeout %v", c.Timeout)
	case c.RouteRefresh < 0:
		return fmt.Errorf("client: config: negative route refresh %v", c.RouteRefresh)
	case c.MaxRouteConns < 0:
		return fmt.Errorf("client: config: negative max route conns %d", c.MaxRouteConns)
	case c.TLS != nil:
		if err := c.TLS.Validate(); err != nil {
			return err
		}
	}
	if c.Leases != nil {
		return c.Leases.Validate()
	}
	return nil
}

// withDefaults returns a copy of c with zero fields replaced by defaults.
func (c Config) withDefaults() Config {
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.RouteRefresh == 0 {
		c.RouteRefresh = DefaultRouteRefresh
	}
	if c.MaxRouteConns == 0 {
		c.MaxRouteConns = DefaultMaxRouteConns
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	return c
}
