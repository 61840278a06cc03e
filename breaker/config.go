package breaker

import (
	"fmt"
	"time"
)

// MaxFailureThreshold is the largest accepted [Config.FailureThreshold]. The
// consecutive-failure count shares one atomic word with the state, and this
// is what fits.
const MaxFailureThreshold = 1<<30 - 1

// Config tunes a [Breaker]. The zero value is not valid; start from
// [DefaultConfig].
type Config struct {
	// FailureThreshold is how many consecutive failed calls open a closed
	// breaker. Lower fails fast sooner after a dependency dies; higher
	// tolerates more isolated errors. Default 5; must be in
	// [1, MaxFailureThreshold].
	FailureThreshold int
	// OpenFor is how long an open breaker rejects every call before it
	// lets probes through. Shorter notices recovery sooner; longer sends a
	// dead dependency fewer probes. Default 1s; must be positive.
	OpenFor time.Duration
	// HalfOpenProbes is how many probe calls may be in flight at once while
	// half-open. That many successful probes close the breaker; any failed
	// probe opens it again for another OpenFor. Default 1; must be at
	// least 1.
	HalfOpenProbes int
}

// DefaultConfig returns the recommended configuration: FailureThreshold 5,
// OpenFor 1s, HalfOpenProbes 1.
func DefaultConfig() Config {
	return Config{FailureThreshold: 5, OpenFor: time.Second, HalfOpenProbes: 1}
}

// Validate reports whether c can be used. It changes nothing.
func (c Config) Validate() error {
	switch {
	case c.FailureThreshold < 1 || c.FailureThreshold > MaxFailureThreshold:
		return fmt.Errorf("breaker: failure threshold %d outside [1, %d]", c.FailureThreshold, MaxFailureThreshold)
	case c.OpenFor <= 0:
		return fmt.Errorf("breaker: open for %s must be positive", c.OpenFor)
	case c.HalfOpenProbes < 1:
		return fmt.Errorf("breaker: half-open probes %d must be at least 1", c.HalfOpenProbes)
	}
	return nil
}
