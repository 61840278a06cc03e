package redisclock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/clock"

	"github.com/weirhq/weir/redisbackend"
)

// Source tells the Redis server's time. *redisbackend.Backend satisfies it.
type Source interface {
	// Time returns the server's TIME in Unix nanoseconds (the time base of
	// every TAT), bounded by ctx.
	Time(ctx context.Context) (int64, error)
}

var _ Source = (*redisbackend.Backend)(nil)

// Clock is the node's view of the Redis server's clock: the local clock
// plus an offset measured against Redis TIME. It is safe for concurrent
// use.
//
// Concurrency idiom: the hot path (Now, Offset, Synced) only loads and
// compare-and-swaps atomics; Sync, which talks to Redis, is serialised by
// mu and publishes the offset before the synced flag.
type Clock struct {
	cfg    Config
	src    Source
	local  clock.Clock
	logger *slog.Logger
	m      *metrics

	// epoch is local.Now() at New; local time is measured as the duration
	// since it, which uses Go's monotonic clock when local is clock.Real, so
	// a step of the node's wall clock does not move Now.
	epoch      time.Time
	epochNanos int64

	offset atomic.Int64 // Redis time - local time, nanoseconds
	synced atomic.Bool  // set after the first successful Sync
	floor  atomic.Int64 // largest value Now returned since synced

	mu      sync.Mutex // serialises Sync
	failing bool       // guarded by mu; the last Sync failed
	lastRTT int64      // guarded by mu; the rtt of the sample that set the offset
}

// New returns a Clock following src, with local as the node's clock
// (nil: clock.Real(), the production choice); Run's resampling timer
// runs on it too. Until the first successful [Clock.Sync] its
// offset is 0. Metrics are registered on reg (nil: not registered); logger
// (nil: discarded) receives sync failures and recoveries, once per
// transition.
//
// New returns an error, and registers nothing, if cfg is invalid, if src
// is nil; it returns the registry's error if the metrics cannot
// be registered (for example a second Clock on the same registry).
func New(cfg Config, src Source, local clock.Clock, logger *slog.Logger, reg prometheus.Registerer) (*Clock, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if src == nil {
		return nil, errors.New("redisclock: a source is required")
	}
	if local == nil {
		local = clock.Real()
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	epoch := local.Now()
	return &Clock{
		cfg: cfg, src: src, local: local, logger: logger, m: m,
		epoch: epoch, epochNanos: epoch.UnixNano(),
	}, nil
}

// localNanos is the local clock in Unix nanoseconds, advanced
// monotonically from the epoch.
func (c *Clock) localNanos() int64 {
	return c.epochNanos + int64(c.local.Since(c.epoch))
}

// Now returns the current time on the Redis time base, in Unix
// nanoseconds (the unit of every TAT): local time plus the offset. From
// the first successful Sync on it never returns less than a value it
// returned before, so TATs never see time go backwards when a resync
// shrinks the offset: Now then stands still until the new time catches
// up. (Standing still only makes decisions stricter.)
//
// Before the first successful Sync, Now is the local clock, which is not
// on the Redis time base; the first Sync may then move it either way.
// Callers must not decide with it before [Clock.Synced] is true.
func (c *Clock) Now() int64 {
	synced := c.synced.Load() // before offset: synced implies the offset is set
	t := c.localNanos() + c.offset.Load()
	if !synced {
		return t
	}
	for {
		f := c.floor.Load()
		if t <= f {
			return f
		}
		if c.floor.CompareAndSwap(f, t) {
			return t
		}
	}
}

// Offset returns the current estimate of Redis time minus local time.
func (c *Clock) Offset() time.Duration {
	return time.Duration(c.offset.Load())
}

// Synced reports whether a Sync has succeeded at least once.
func (c *Clock) Synced() bool { return c.synced.Load() }

// Sync resamples the offset now: it sends Config.Samples TIME commands one
// after the other, each bounded by Config.Timeout, and of the successful
// ones takes the sample with the lowest round trip rtt, setting
// offset = redis - (t0 + rtt/2), where t0 is the local time the command
// was sent. If no sample succeeds it returns an error and keeps the old
// offset.
func (c *Clock) Sync(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	best, err := c.bestSample(ctx)
	if err != nil {
		c.m.syncErrors.Inc()
		if !c.failing {
			c.failing = true
			c.logger.Warn("redis clock sync failing; keeping the last offset", "offset", c.Offset(), "synced", c.Synced(), "err", err)
		}
		return err
	}
	if c.synced.Load() {
		c.noteStepLocked(best)
	}
	c.lastRTT = best.rtt
	c.offset.Store(best.offset)
	first := !c.synced.Swap(true)
	c.m.offset.Set(time.Duration(best.offset).Seconds())
	c.m.rtt.Set(time.Duration(best.rtt).Seconds())
	if first || c.failing {
		c.failing = false
		c.logger.Info("redis clock synced", "offset", c.Offset(), "rtt", time.Duration(best.rtt))
	}
	return nil
}

// noteStepLocked logs and counts a resync that moves the offset by more
// than StepThreshold beyond what the two samples' errors explain. The
// caller holds mu and adopts the new offset after.
func (c *Clock) noteStepLocked(s sample) {
	step := s.offset - c.offset.Load()
	noise := (c.lastRTT + s.rtt) / 2
	if max(step, -step) <= c.cfg.StepThreshold.Nanoseconds()+noise {
		return
	}
	dir, effect := "forward", "every key is credited the step once (at most step/T units, never above its burst)"
	if step < 0 {
		dir, effect = "backward", "Now holds still until the new time catches up: keys refill nothing meanwhile, none is credited"
	}
	c.m.steps.WithLabelValues(dir).Inc()
	c.m.lastStep.Set(time.Duration(step).Seconds())
	c.logger.Warn("redis time base changed (a failover to a server with another clock, or its clock was set); keep the Redis hosts' clocks in sync with NTP",
		"step", time.Duration(step), "direction", dir, "effect", effect,
		"old_offset", c.Offset(), "new_offset", time.Duration(s.offset), "rtt", time.Duration(s.rtt))
}

// sample is one TIME measurement, in nanoseconds.
type sample struct {
	rtt    int64
	offset int64
}

// bestSample takes up to Config.Samples samples and returns the one with
// the lowest round trip.
func (c *Clock) bestSample(ctx context.Context) (sample, error) {
	var (
		best    sample
		found   bool
		lastErr error
	)
	for range c.cfg.Samples {
		if ctx.Err() != nil {
			lastErr = errors.Join(ctx.Err(), lastErr)
			break
		}
		s, err := c.sampleOnce(ctx)
		if err != nil {
			lastErr = err
			continue
		}
		if !found || s.rtt < best.rtt {
			best, found = s, true
		}
	}
	if !found {
		return sample{}, fmt.Errorf("redisclock: sync: no sample of %d succeeded: %w", c.cfg.Samples, lastErr)
	}
	return best, nil
}

func (c *Clock) sampleOnce(ctx context.Context) (sample, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	t0 := c.localNanos()
	server, err := c.src.Time(ctx)
	t1 := c.localNanos()
	if err != nil {
		return sample{}, err
	}
	rtt := t1 - t0
	if rtt < 0 {
		return sample{}, fmt.Errorf("redisclock: local clock went back %s during a sample", time.Duration(-rtt))
	}
	return sample{rtt: rtt, offset: server - (t0 + rtt/2)}, nil
}

// Run calls Sync at once and then every Config.Interval until ctx is done,
// and returns nil. A failed Sync keeps the last good offset; the next one
// is tried at the normal interval. Run blocks; start it in its own
// goroutine.
func (c *Clock) Run(ctx context.Context) error {
	timer := c.local.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C():
		}
		_ = c.Sync(ctx) // counted and logged by Sync
		timer.Reset(c.cfg.Interval)
	}
}
