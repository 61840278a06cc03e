package breaker

import (
	"fmt"
	"math"
	"time"
)

// Config tunes a [Breaker]. The zero value is not valid; start from
// [DefaultConfig].
//
// A breaker opens on either of two rules, both over failures its caller
// reported (see [Breaker.Allow] for what a caller should report):
//
//   - ConsecutiveFailures failures in a row, with no success between them:
//     a dead dependency (connection refused, reset, unavailable) fails every
//     call at once and is cut off after that many calls;
//   - a failure rate of at least FailureRate over the last Window, once at
//     least MinRequests calls finished in it: a dependency that fails often
//     but not always. A single failure of a dependency that otherwise
//     answers trips neither rule.
type Config struct {
	// ConsecutiveFailures is how many failed calls in a row open a closed
	// breaker. Lower cuts a dead dependency off sooner; higher tolerates
	// more isolated errors. Default 5; must be in [1, math.MaxUint32].
	ConsecutiveFailures int
	// Window is the rolling period over which the failure rate is
	// measured, in ten buckets. Default 10s; must be at least 10ns.
	Window time.Duration
	// MinRequests is how many calls must have finished (succeeded or
	// failed) within Window before the rate rule may open the breaker, so a
	// few calls cannot make a rate. Default 20; must be at least 1.
	MinRequests int
	// FailureRate is the share of failed calls within Window, in (0, 1],
	// that opens the breaker. Default 0.5.
	FailureRate float64
	// OpenFor is how long an open breaker rejects every call before it
	// lets probes through. Shorter notices recovery sooner; longer sends a
	// dead dependency fewer probes. Default 1s; must be positive.
	OpenFor time.Duration
	// HalfOpenProbes is how many probe calls a half-open breaker lets
	// through. That many successful probes close it; any failed probe opens
	// it again for another OpenFor. Default 1; must be at least 1.
	HalfOpenProbes int
}

// windowBuckets is how many buckets the rolling Window is kept in: the
// rate forgets old calls a tenth of a window at a time.
const windowBuckets = 10

// DefaultConfig returns the recommended configuration: ConsecutiveFailures
// 5, Window 10s, MinRequests 20, FailureRate 0.5, OpenFor 1s,
// HalfOpenProbes 1.
func DefaultConfig() Config {
	return Config{
		ConsecutiveFailures: 5,
		Window:              10 * time.Second,
		MinRequests:         20,
		FailureRate:         0.5,
		OpenFor:             time.Second,
		HalfOpenProbes:      1,
	}
}

// Validate reports whether c can be used. It changes nothing.
func (c Config) Validate() error {
	switch {
	case c.ConsecutiveFailures < 1 || c.ConsecutiveFailures > math.MaxUint32:
		return fmt.Errorf("breaker: consecutive failures %d outside [1, %d]", c.ConsecutiveFailures, uint32(math.MaxUint32))
	case c.Window < windowBuckets:
		return fmt.Errorf("breaker: window %s must be at least %dns", c.Window, windowBuckets)
	case c.MinRequests < 1 || c.MinRequests > math.MaxUint32:
		return fmt.Errorf("breaker: min requests %d outside [1, %d]", c.MinRequests, uint32(math.MaxUint32))
	case !(c.FailureRate > 0 && c.FailureRate <= 1):
		return fmt.Errorf("breaker: failure rate %v outside (0, 1]", c.FailureRate)
	case c.OpenFor <= 0:
		return fmt.Errorf("breaker: open for %s must be positive", c.OpenFor)
	case c.HalfOpenProbes < 1 || c.HalfOpenProbes > math.MaxUint32:
		return fmt.Errorf("breaker: half-open probes %d outside [1, %d]", c.HalfOpenProbes, uint32(math.MaxUint32))
	}
	return nil
}
