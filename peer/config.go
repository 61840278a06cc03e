package peer

import (
	"fmt"
	"time"

	"google.golang.org/grpc/credentials"
)

// Defaults used by DefaultClientConfig and for zero fields of a ClientConfig.
const (
	// DefaultMaxBatch is the most items sent in one RPC.
	DefaultMaxBatch = 128
	// DefaultTimeout bounds one forward on top of the caller's context. It
	// is a ceiling, not the usual wait: the router derives each forward's
	// deadline from its caller's (see forward.ForwardConfig), so a slow
	// owner is waited for as long as the caller can afford.
	DefaultTimeout = time.Second
	// DefaultMaxInFlight is the number of concurrent RPCs per peer; see the
	// package documentation for how it was chosen.
	DefaultMaxInFlight = 1
	// DefaultMaxQueue bounds the items waiting for one peer.
	DefaultMaxQueue = 4096
)

// ClientConfig describes a Client. Zero numeric fields mean their defaults.
type ClientConfig struct {
	// MaxBatch is the most items coalesced into one RPC, at most MaxItems.
	// A batch is also cut before it would exceed MaxRequestBytes.
	// Bigger batches save RPCs under load; each item still waits only for
	// its own batch.
	MaxBatch int

	// Window is how long an item may wait for others to fill its batch. 0
	// (the default) never waits: a batch leaves as soon as an RPC slot to
	// its peer is free (see MaxInFlight), so items only accumulate while the
	// peer is busy. A positive window trades up to Window of latency per
	// forward for fuller batches.
	Window time.Duration

	// MaxInFlight is the most RPCs in flight to one peer at once. Items that
	// arrive while all slots are busy wait and leave together when one
	// frees. 1 gives the biggest batches; a few overlap round trips.
	MaxInFlight int

	// MaxQueue bounds the items waiting for one peer while its RPC slots
	// are busy. An item that finds the queue full fails at once with
	// ErrQueueFull (counted in weir_forwards_total as result
	// "queue_full") instead of waiting: the caller applies its failure
	// policy, and a slow peer cannot pile up callers and memory.
	MaxQueue int

	// Timeout is the ceiling on one forward, applied inside the caller's
	// context: the earlier deadline wins. The caller's context is meant to
	// carry the real budget (the router derives it from its own caller's
	// deadline and the owner's latency); a short Timeout here would turn a
	// slow owner into failures that no caller asked for.
	Timeout time.Duration

	// LocalName is this node's name, sent with every request so the owner
	// knows who forwarded; at most MaxNodeNameBytes.
	LocalName string

	// TLS secures every connection to a peer; nil dials in plaintext, which
	// is only acceptable on loopback. For the node-to-node plane use
	// mutual TLS: tlsfiles.Store.ClientCredentials presents this node's
	// certificate and verifies the peer's against the cluster CA, following
	// certificate reloads.
	TLS credentials.TransportCredentials
}

// DefaultClientConfig returns the defaults: MaxBatch DefaultMaxBatch, Window
// 0, MaxInFlight DefaultMaxInFlight, Timeout DefaultTimeout. The caller sets
// LocalName.
func DefaultClientConfig() ClientConfig {
	return ClientConfig{
		MaxBatch:    DefaultMaxBatch,
		MaxInFlight: DefaultMaxInFlight,
		Timeout:     DefaultTimeout,
		MaxQueue:    DefaultMaxQueue,
	}
}

// Validate reports the first problem with c, or nil. It changes nothing.
func (c ClientConfig) Validate() error {
	switch {
	case c.MaxBatch < 0 || c.MaxBatch > MaxItems:
		return fmt.Errorf("peer: config: max batch %d outside [0, %d]", c.MaxBatch, MaxItems)
	case c.Window < 0:
		return fmt.Errorf("peer: config: negative window %v", c.Window)
	case c.MaxInFlight < 0:
		return fmt.Errorf("peer: config: negative max in flight %d", c.MaxInFlight)
	case c.MaxQueue < 0:
		return fmt.Errorf("peer: config: negative max queue %d", c.MaxQueue)
	case c.Timeout < 0:
		return fmt.Errorf("peer: config: negative timeout %v", c.Timeout)
	case len(c.LocalName) > MaxNodeNameBytes:
		return fmt.Errorf("peer: config: local name of %d bytes exceeds %d", len(c.LocalName), MaxNodeNameBytes)
	}
	return nil
}

// withDefaults returns a copy of c with zero fields replaced by defaults.
func (c ClientConfig) withDefaults() ClientConfig {
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxQueue == 0 {
		c.MaxQueue = DefaultMaxQueue
	}
	return c
}
