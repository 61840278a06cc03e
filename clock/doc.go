// Package clock is weir's one injected clock: the current time, elapsed
// time, timers and tickers behind a small interface, so that code which
// waits or measures can be driven by a manual clock in tests
// (clock/clocktest.Manual) and never sleeps there.
//
// Production code takes a [Clock] (a Config or Deps field, or an option;
// nil means [Real]) and calls it instead of time.Now, time.Since,
// time.NewTimer and time.NewTicker:
//
//	clk := deps.Clock
//	if clk == nil {
//		clk = clock.Real()
//	}
//	t := clk.NewTicker(cfg.Interval)
//	defer t.Stop()
//	for {
//		select {
//		case <-ctx.Done():
//			return ctx.Err()
//		case <-t.C():
//			round(clk.Now())
//		}
//	}
//
// Units: every duration is a [time.Duration]; every reading a [time.Time].
// [Real]'s readings carry Go's monotonic clock reading, so Since and Sub
// between them are immune to wall-clock steps; a manual clock's readings
// carry none, and a test may step it backwards on purpose.
//
// The timer and ticker semantics are the time package's as of Go 1.23:
// Stop and Reset return what time.Timer's do, and after either returns no
// value from before the call is received from C. A value is sent without
// blocking: a ticker whose reader is slow drops ticks rather than queueing
// them.
//
// Pure code (gcra, lease, region) takes now as a number and stays pure:
// its caller reads the clock once and passes the reading down. Contexts'
// deadlines (context.WithTimeout) still run on the real clock.
//
// This package imports nothing of weir's. Every Clock, Timer and Ticker it
// returns is safe for concurrent use.
package clock
