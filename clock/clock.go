package clock

import "time"

// Clock tells the time and makes timers and tickers. Implementations are
// safe for concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Since returns the time elapsed since t: Now().Sub(t).
	Since(t time.Time) time.Duration
	// NewTimer returns a Timer that sends the time on its channel once, at
	// least d after now (at once if d <= 0), as time.NewTimer does.
	NewTimer(d time.Duration) Timer
	// NewTicker returns a Ticker that sends the time on its channel every
	// d, dropping ticks for a slow reader, as time.NewTicker does. d must
	// be positive; NewTicker panics otherwise.
	NewTicker(d time.Duration) Ticker
}

// Timer is a single event, as *time.Timer. Safe for concurrent use, but
// as with *time.Timer only one goroutine should read C.
type Timer interface {
	// C returns the channel the time is sent on when the timer fires. It
	// is the same channel for the life of the Timer.
	C() <-chan time.Time
	// Stop prevents the timer from firing. It returns true if the call
	// stopped it, false if it had already fired (and its value was
	// received) or been stopped. No value is received from C after Stop
	// returns.
	Stop() bool
	// Reset rearms the timer to fire d from now. It returns what Stop
	// would have returned; no value from before the call is received from
	// C after it returns.
	Reset(d time.Duration) bool
}

// Ticker delivers ticks at intervals, as *time.Ticker.
type Ticker interface {
	// C returns the channel the ticks are sent on; the same channel for
	// the life of the Ticker.
	C() <-chan time.Time
	// Stop turns the ticker off; no tick is received from C after it
	// returns. It does not close C.
	Stop()
	// Reset stops the ticker and restarts it with period d, the next tick
	// d from now. d must be positive; Reset panics otherwise.
	Reset(d time.Duration)
}

// Real returns the wall clock of the time package. Its readings carry
// the monotonic clock reading, as time.Now's do.
func Real() Clock { return realClock{} }

type realClock struct{}

var _ Clock = realClock{}

func (realClock) Now() time.Time                  { return time.Now() }
func (realClock) Since(t time.Time) time.Duration { return time.Since(t) }
func (realClock) NewTimer(d time.Duration) Timer  { return realTimer{time.NewTimer(d)} }
func (realClock) NewTicker(d time.Duration) Ticker {
	return realTicker{time.NewTicker(d)}
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time   { return r.t.C }
func (r realTicker) Stop()                 { r.t.Stop() }
func (r realTicker) Reset(d time.Duration) { r.t.Reset(d) }
