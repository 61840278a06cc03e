// Package clocktest provides [Manual], a clock.Clock that moves only when
// a test moves it, so that tests of code with timers and tickers never
// sleep: they wait until the code under test has armed its timer
// ([Manual.WaitForTimers]), move the clock past its deadline
// ([Manual.Advance]) and then wait on the effect.
//
//	clk := clocktest.NewManual(time.Unix(1_700_000_000, 0))
//	go w.Run(ctx) // w built with clk
//	if err := clk.WaitForTimers(ctx, 1); err != nil {
//		t.Fatal(err)
//	}
//	clk.Advance(cfg.FlushInterval) // the flush timer fires
//
// Semantics, as the time package's (Go 1.23 and later) wherever a manual
// clock allows:
//   - A timer fires when the clock reaches its deadline: at exactly the
//     deadline, never before. A timer made or reset with d <= 0 fires at
//     once, inside NewTimer or Reset.
//   - Firing sends the deadline (not the time the clock was moved to) on
//     the channel without blocking. The channel holds one value: a
//     ticker whose reader is behind drops ticks, and one Advance over
//     several periods delivers one tick, as time.Ticker does for a slow
//     reader; the next deadline is the first multiple of the period
//     after the new time.
//   - Stop and Reset return what time.Timer's do and discard a value
//     sent but not yet received (it counts as not fired), so no stale
//     value is received after they return.
//   - Timers fire in deadline order, ties in the order they were armed,
//     after the clock has moved: a goroutine woken by a timer reads the
//     new time from Now.
//
// The clock never goes backwards unless the test says so with
// [Manual.StepBack], which models a wall-clock step: Now and Since go
// back, pending timers keep their remaining durations.
//
// A Manual and its timers are safe for concurrent use.
package clocktest
