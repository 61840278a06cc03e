package redisclock

import (
	"fmt"
	"time"
)

// Config tunes a [Clock]. The zero value is not valid; start from
// [DefaultConfig].
type Config struct {
	// Interval is the pause between resamples in [Clock.Run]. Shorter
	// tracks drift between the node's clock and Redis's more closely at the
	// cost of Samples TIME commands per resample. Default 1s; must be
	// positive.
	Interval time.Duration
	// Timeout bounds one TIME command. A sample that takes longer is worth
	// little anyway: its error bound is half its round trip. Default 50ms;
	// must be positive.
	Timeout time.Duration
	// Samples is how many TIME commands one resample sends, one after the
	// other; the one with the lowest round trip sets the offset. Default 3;
	// must be at least 1.
	Samples int
	// StepThreshold is how far one resync may move the offset, beyond
	// its two samples' error (half of each round trip), before it counts
	// as a change of time base rather than drift: a failover to a server
	// whose clock differs, or the server's clock being set. A step is
	// logged and counted (weir_redis_clock_steps_total) and then adopted;
	// see the package doc for what each direction costs. Default 5ms
	// (NTP keeps hosts well within 1ms); must be positive.
	StepThreshold time.Duration
}

// DefaultConfig returns the recommended configuration.
func DefaultConfig() Config {
	return Config{Interval: time.Second, Timeout: 50 * time.Millisecond, Samples: 3, StepThreshold: 5 * time.Millisecond}
}

// Validate reports whether c can be used. It changes nothing.
func (c Config) Validate() error {
	switch {
	case c.Interval <= 0:
		return fmt.Errorf("redisclock: interval %s must be positive", c.Interval)
	case c.Timeout <= 0:
		return fmt.Errorf("redisclock: timeout %s must be positive", c.Timeout)
	case c.Samples < 1:
		return fmt.Errorf("redisclock: samples %d must be at least 1", c.Samples)
	case c.StepThreshold <= 0:
		return fmt.Errorf("redisclock: step threshold %s must be positive", c.StepThreshold)
	}
	return nil
}
