package region

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

var (
	// ErrInvalidConfig is returned for a Config that fails Validate.
	ErrInvalidConfig = errors.New("region: invalid config")
	// ErrInvalidReport is returned by [Home.Handle] for a report that is
	// malformed or not meant for this home. Nothing changes.
	ErrInvalidReport = errors.New("region: invalid report")
)

// Config is the rebalancing settings shared by every region; all regions
// must run with the same Regions, Floor and TTL.
type Config struct {
	// Regions names every region, this one included, each once. The home
	// of a key is chosen among them (HomeOf).
	Regions []string
	// Floor is the share every region holds of every global limit without
	// asking: what it enforces before its first grant and after a grant
	// expires (for example while cut off). len(Regions) × Floor must not
	// exceed Whole. Larger is kinder to a cut-off region and wastes more
	// when a region is idle and the others are saturated.
	Floor Share
	// Interval is how often a region reports its demand to each home
	// (one batched report per home per Interval).
	Interval time.Duration
	// TTL is how long a grant lasts, counted by the region from the moment
	// it sent the report the grant answers. It must exceed Interval, so a
	// grant is renewed before it expires; a few Intervals rides out lost
	// messages. Longer keeps a cut-off region at its share for longer and
	// holds capacity longer after a region dies.
	TTL time.Duration
	// Grace is added to every grant's lifetime at the home, which counts it
	// from the moment it granted. It covers the two clocks running at
	// different rates: Grace ≥ 2ρ·TTL/(1−ρ) for a relative rate error ρ
	// between any two regions' clocks (clock offsets do not matter: each
	// side measures only its own durations). Longer costs capacity, never
	// safety.
	Grace time.Duration
	// Damping is the fraction of the gap between a region's share and its
	// target closed per grant, in (0, 1]. 1 jumps to the target; smaller
	// rides out noisy demand and converges more slowly.
	Damping float64
}

// DefaultConfig returns settings for regions: a 2% floor, reports every
// 500ms, grants that live 4s, a 20ms grace (enough for clocks 2,500 ppm
// apart) and a damping of 0.5. With them the simulator's standard traces
// converge within 3s of a demand shift (docs/regions.md).
func DefaultConfig(regions ...string) Config {
	return Config{
		Regions:  slices.Clone(regions),
		Floor:    Whole / 50,
		Interval: 500 * time.Millisecond,
		TTL:      4 * time.Second,
		Grace:    20 * time.Millisecond,
		Damping:  0.5,
	}
}

// Validate reports whether c is usable. It changes nothing.
func (c Config) Validate() error {
	if err := checkRegions(c.Regions); err != nil {
		return err
	}
	switch {
	case c.Floor < 0 || int64(c.Floor)*int64(len(c.Regions)) > int64(Whole):
		return fmt.Errorf("%w: floor %d × %d regions exceeds %d", ErrInvalidConfig, c.Floor, len(c.Regions), Whole)
	case c.Interval < time.Microsecond:
		return fmt.Errorf("%w: interval %s must be at least 1µs", ErrInvalidConfig, c.Interval)
	case c.TTL <= c.Interval:
		return fmt.Errorf("%w: ttl %s must exceed the interval %s", ErrInvalidConfig, c.TTL, c.Interval)
	case c.Grace < 0:
		return fmt.Errorf("%w: grace %s must not be negative", ErrInvalidConfig, c.Grace)
	case math.IsNaN(c.Damping) || c.Damping <= 0 || c.Damping > 1:
		return fmt.Errorf("%w: damping %v must be in (0, 1]", ErrInvalidConfig, c.Damping)
	}
	return nil
}

// ttl and grace are TTL and Grace on the package's time base, nanoseconds.
func (c Config) ttl() int64   { return c.TTL.Nanoseconds() }
func (c Config) grace() int64 { return c.Grace.Nanoseconds() }

// hasRegion reports whether name is one of c.Regions.
func (c Config) hasRegion(name string) bool { return slices.Contains(c.Regions, name) }
