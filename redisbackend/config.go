package redisbackend

import (
	"fmt"
	"time"
)

// Config tunes a [Backend]. The zero value is not valid; start from
// [DefaultConfig].
type Config struct {
	// Timeout is the ceiling on one call (Decide, DecidePipelined, LoadTATs,
	// StoreTATs, Time), including waiting for a pooled connection and
	// retries. The caller's context deadline still applies when it is
	// sooner. Keep it tight: a slow Redis must not add its latency to every
	// request, and the caller's fallback policy takes over on timeout.
	// Default 50ms; must be positive.
	Timeout time.Duration
}

// DefaultConfig returns the recommended configuration.
func DefaultConfig() Config {
	return Config{Timeout: 50 * time.Millisecond}
}

// Validate reports whether c can be used. It changes nothing.
func (c Config) Validate() error {
	if c.Timeout <= 0 {
		return fmt.Errorf("redisbackend: timeout %s must be positive", c.Timeout)
	}
	return nil
}
