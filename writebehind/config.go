package writebehind

import (
	"fmt"
	"time"
)

// Config tunes a [Writer]. The zero value is not valid; start from
// [DefaultConfig].
type Config struct {
	// FlushInterval is the pause between the end of one flush and the start
	// of the next while Redis is healthy. It bounds what a crash can lose
	// (see the package doc): shorter loses less and sends smaller batches,
	// longer coalesces more marks per key into one write. Default 5ms; must
	// be positive.
	FlushInterval time.Duration
	// MaxBatch is the most TATs sent in one StoreTATs call (one Redis
	// pipeline). Larger batches mean fewer round trips but longer ones.
	// Default 512; must be positive.
	MaxBatch int
	// Timeout bounds one StoreTATs call. A call that times out counts as
	// failed: its TATs go back to the backlog and are retried. Default
	// 100ms; must be positive.
	Timeout time.Duration
	// MaxBackoff caps the exponential retry backoff (starting at
	// FlushInterval, doubling per consecutive failure) while the Sink fails.
	// Larger spares a struggling Redis, smaller drains the backlog sooner
	// after it recovers. Default 1s; must be at least FlushInterval.
	MaxBackoff time.Duration
	// MaxBacklog bounds the keys waiting for a flush, split evenly over
	// the backlog's shards. A mark of a new key into a full shard first
	// drops the shard's rested marks (a TAT at or before now: Redis's older
	// value for the key is rested too, so nothing is lost); if none are,
	// the new mark is dropped and counted in
	// weir_writebehind_backlog_full_total, and a crash may then lose that
	// key's state. 0 means no bound. Default 1,000,000.
	MaxBacklog int
}

// DefaultConfig returns the recommended configuration.
func DefaultConfig() Config {
	return Config{
		FlushInterval: 5 * time.Millisecond,
		MaxBatch:      512,
		Timeout:       100 * time.Millisecond,
		MaxBackoff:    time.Second,
		MaxBacklog:    1_000_000,
	}
}

// Validate reports whether c can be used. It changes nothing.
func (c Config) Validate() error {
	switch {
	case c.FlushInterval <= 0:
		return fmt.Errorf("writebehind: flush interval %s must be positive", c.FlushInterval)
	case c.MaxBatch <= 0:
		return fmt.Errorf("writebehind: max batch %d must be positive", c.MaxBatch)
	case c.Timeout <= 0:
		return fmt.Errorf("writebehind: timeout %s must be positive", c.Timeout)
	case c.MaxBacklog < 0:
		return fmt.Errorf("writebehind: max backlog %d is negative", c.MaxBacklog)
	case c.MaxBackoff < c.FlushInterval:
		return fmt.Errorf("writebehind: max backoff %s must be at least the flush interval %s", c.MaxBackoff, c.FlushInterval)
	}
	return nil
}
