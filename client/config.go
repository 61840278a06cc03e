package client

import (
	"errors"
	"fmt"
	"time"
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
}

// DefaultConfig returns a Config with batching off, MaxBatch DefaultMaxBatch
// and Timeout DefaultTimeout. The caller must set Target.
func DefaultConfig() Config {
	return Config{
		MaxBatch: DefaultMaxBatch,
		Timeout:  DefaultTimeout,
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
	case c.TLS != nil:
		return c.TLS.Validate()
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
	return c
}
