package client

import (
	"fmt"
	"time"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/lease"
)

// LeaseConfig turns on client-side leases (Config.Leases): the client
// holds leases of its hot leasable keys, granted by their owners through
// Target, and decides them in this process. The zero value of every field
// means its default.
type LeaseConfig struct {
	// Tick is how often due refreshes are sent: at most one batched
	// refresh per Tick carries every key the client holds or wants (and,
	// between ticks, one probe for a key that ran dry). Keep it well
	// under the shortest lease TTL. 0 means 10ms.
	Tick time.Duration
	// RefreshTimeout bounds how long a refresh waits for its answer; one
	// that takes longer is given up (its returned units strand at their
	// owners until their leases expire) and decisions go over Decide until
	// a refresh is answered again. 0 means 150ms.
	RefreshTimeout time.Duration
	// MaxKeys bounds the descriptor sets the client remembers (whether
	// they are leasable, and their keys and terms). Descriptor sets
	// beyond it are decided over Decide. 0 means 10,000.
	MaxKeys int
	// Holder tunes the demand estimate and when a key asks for a lease
	// (package lease); its Name is unused (the node names the holder).
	// Zero fields take lease.DefaultHolderConfig's values.
	Holder lease.HolderConfig
	// Clock is the client's clock for leases; nil is clock.Real().
	Clock clock.Clock
}

// Defaults of LeaseConfig.
const (
	DefaultLeaseTick           = 10 * time.Millisecond
	DefaultLeaseRefreshTimeout = 150 * time.Millisecond
	DefaultLeaseMaxKeys        = 10_000
)

// DefaultLeaseConfig returns the defaults spelt out.
func DefaultLeaseConfig() LeaseConfig {
	h := lease.DefaultHolderConfig()
	return LeaseConfig{Tick: DefaultLeaseTick, RefreshTimeout: DefaultLeaseRefreshTimeout, MaxKeys: DefaultLeaseMaxKeys, Holder: h}
}

// Validate reports the first problem with c, naming its field. It changes
// nothing.
func (c LeaseConfig) Validate() error {
	switch {
	case c.Tick < 0:
		return fmt.Errorf("client: config: leases: negative tick %v", c.Tick)
	case c.RefreshTimeout < 0:
		return fmt.Errorf("client: config: leases: negative refresh timeout %v", c.RefreshTimeout)
	case c.MaxKeys < 0:
		return fmt.Errorf("client: config: leases: negative max keys %d", c.MaxKeys)
	}
	h := c.withDefaults().Holder
	h.Name = "client"
	if err := h.Validate(); err != nil {
		return fmt.Errorf("client: config: leases: holder: %w", err)
	}
	return nil
}

func (c LeaseConfig) withDefaults() LeaseConfig {
	d := DefaultLeaseConfig()
	if c.Tick == 0 {
		c.Tick = d.Tick
	}
	if c.RefreshTimeout == 0 {
		c.RefreshTimeout = d.RefreshTimeout
	}
	if c.MaxKeys == 0 {
		c.MaxKeys = d.MaxKeys
	}
	if c.Holder.HalfLife == 0 {
		c.Holder.HalfLife = d.Holder.HalfLife
	}
	if c.Holder.RefreshWhenLeft == 0 {
		c.Holder.RefreshWhenLeft = d.Holder.RefreshWhenLeft
	}
	if c.Holder.MinUnits == 0 {
		c.Holder.MinUnits = d.Holder.MinUnits
	}
	if c.Holder.IdleAfter == 0 {
		c.Holder.IdleAfter = d.Holder.IdleAfter
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	return c
}
