// Package redisclock gives every node of a weir cluster one time base for
// TATs: the Redis server's clock. A [Clock] measures the offset between the
// node's clock and Redis TIME and adds it to the local clock, so that clock
// differences between nodes cannot credit a key with time it never rested
// when its group moves to another owner.
//
// Each resample ([Clock.Sync]) sends a few TIME commands and keeps the one
// with the lowest round trip rtt: sent at local time t0 and answered with
// server time r, it sets offset = r - (t0 + rtt/2), accurate to within
// rtt/2. [Clock.Now] is then an atomic load and an atomic max, with no lock
// and no I/O. From the first successful Sync on, Now never goes backwards,
// even when a resync lowers the offset: it stands still until time catches
// up, which only makes decisions stricter. While Redis is unreachable the
// last good offset stays in use.
//
// Units: every instant here (Source.Time, Now) is in Unix nanoseconds,
// the unit of every TAT (see package gcra), and the offset is a
// time.Duration. Redis TIME has microsecond resolution, so the server's
// readings are whole microseconds; Now advances by the local clock's
// nanoseconds between them.
//
// On a Redis Cluster the masters' clocks differ as their hosts' do, so
// [ClientSource] always asks the master serving the slot of [PinKey]: every
// node, and every resync, reads the same server clock.
//
// A failover of the pinned slot makes the promoted replica's clock the time
// base. A resync that moves the offset by more than Config.StepThreshold
// beyond its samples' error is such a change (or the server's clock was
// set): it is logged and counted (weir_redis_clock_steps_total by
// direction) and adopted. Forward, every key is credited the step once (at
// most step/T units, never past its burst), as strict keys are by the new
// master's own TIME; backward, Now stands still until the new base catches
// up, crediting nothing. [ClientSource] asks a Cluster client to reload its
// slot map when TIME fails, so the clock follows the promoted master.
//
// Usage:
//
//	src, _ := redisclock.NewClientSource(rdb) // a *redis.Client or *redis.ClusterClient
//	clk, err := redisclock.New(redisclock.DefaultConfig(), src, clock.Real(), logger, reg)
//	if err := clk.Sync(ctx); err != nil { ... } // before owning any group
//	go clk.Run(ctx)                              // resample every Interval
//	now := clk.Now()                             // Unix nanoseconds, Redis time base
//
// Caller's duties:
//
//   - Sync successfully (or wait for [Clock.Synced]) before deciding or
//     persisting TATs with Now: until then Now is the plain local clock.
//   - Pass clock.Real() (or nil) as local in production; tests pass a
//     clocktest.Manual. Local time is measured as a duration since New
//     on Go's monotonic clock, so a step of the node's wall clock does
//     not move Now; the next resync absorbs slow drift.
//   - Watch weir_redis_clock_rtt_seconds: the offset is only as good as
//     half the round trip of its sample.
//
// A Clock is safe for concurrent use.
package redisclock
