package clocktest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/weirhq/weir/clock"
)

// Manual is a clock.Clock whose time moves only by Advance, Set and
// StepBack. The zero value is not usable; call [NewManual]. Safe for
// concurrent use.
//
// Concurrency idiom: one mutex guards the time and every timer's state;
// timers send on their channels (buffered, one slot) under it without
// blocking, so Stop and Reset, which drain under it too, never race a
// send.
type Manual struct {
	mu struct {
		sync.Mutex
		now     time.Time
		pending map[*timer]struct{}
		seq     uint64        // arming order, breaks deadline ties
		armed   chan struct{} // closed and replaced whenever a timer is armed
	}
}

var _ clock.Clock = (*Manual)(nil)

// NewManual returns a Manual clock reading start.
func NewManual(start time.Time) *Manual {
	m := &Manual{}
	m.mu.now = start.Round(0) // no monotonic reading: StepBack may step it
	m.mu.pending = make(map[*timer]struct{})
	m.mu.armed = make(chan struct{})
	return m
}

// Now returns the clock's time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.now
}

// Since returns Now().Sub(t); negative if t is after Now.
func (m *Manual) Since(t time.Time) time.Duration { return m.Now().Sub(t) }

// NewTimer returns a timer that fires when the clock reaches now+d; at
// once if d <= 0.
func (m *Manual) NewTimer(d time.Duration) clock.Timer {
	t := &timer{m: m, c: make(chan time.Time, 1)}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.armLocked(t, d)
	return t
}

// NewTicker returns a ticker with period d, first firing at now+d. It
// panics if d is not positive, as time.NewTicker does.
func (m *Manual) NewTicker(d time.Duration) clock.Ticker {
	if d <= 0 {
		panic("clocktest: non-positive interval for NewTicker")
	}
	t := &timer{m: m, c: make(chan time.Time, 1), period: d}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.armLocked(t, d)
	return (*ticker)(t)
}

// Advance moves the clock forward by d and fires every timer whose
// deadline it reaches. It panics if d is negative: use StepBack.
func (m *Manual) Advance(d time.Duration) {
	if d < 0 {
		panic(fmt.Sprintf("clocktest: Advance(%s) would move the clock backwards; use StepBack", d))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.now = m.mu.now.Add(d)
	m.fireLocked()
}

// Set moves the clock to t and fires every timer whose deadline it
// reaches. It panics if t is before Now: use StepBack.
func (m *Manual) Set(t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t.Before(m.mu.now) {
		panic(fmt.Sprintf("clocktest: Set(%s) is before now %s; use StepBack", t, m.mu.now))
	}
	m.mu.now = t.Round(0)
	m.fireLocked()
}

// StepBack moves the clock back by d, as a wall-clock step would: Now
// and Since go back, while every pending timer's deadline moves back by d
// too, keeping its remaining duration (the runtime's timers run on the
// monotonic clock, which never steps). Use it in tests of code that must
// survive a clock going backwards. It panics if d is negative.
func (m *Manual) StepBack(d time.Duration) {
	if d < 0 {
		panic(fmt.Sprintf("clocktest: StepBack(%s) is negative; use Advance", d))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.now = m.mu.now.Add(-d)
	for t := range m.mu.pending {
		t.when = t.when.Add(-d)
	}
}

// Timers returns the deadlines of the pending (armed, not yet fired or
// stopped) timers and tickers, earliest first.
func (m *Manual) Timers() []time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]time.Time, 0, len(m.mu.pending))
	for t := range m.mu.pending {
		out = append(out, t.when)
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

// WaitForTimers blocks until at least n timers or tickers are pending,
// or ctx ends; then it returns ctx's error, wrapped with the count seen.
// Wait for the code under test to arm its timer before advancing past
// it, instead of sleeping.
func (m *Manual) WaitForTimers(ctx context.Context, n int) error {
	for {
		m.mu.Lock()
		have, armed := len(m.mu.pending), m.mu.armed
		m.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("clocktest: %d timers pending, waiting for %d: %w", have, n, ctx.Err())
		case <-armed:
		}
	}
}

// armLocked arms t to fire d from now, firing it at once if d <= 0.
func (m *Manual) armLocked(t *timer, d time.Duration) {
	m.mu.seq++
	t.seq, t.when = m.mu.seq, m.mu.now.Add(d)
	m.mu.pending[t] = struct{}{}
	close(m.mu.armed)
	m.mu.armed = make(chan struct{})
	if d <= 0 {
		m.fireLocked()
	}
}

// fireLocked fires the pending timers whose deadline is at or before
// now, in deadline order (ties in arming order).
func (m *Manual) fireLocked() {
	var due []*timer
	for t := range m.mu.pending {
		if !t.when.After(m.mu.now) {
			due = append(due, t)
		}
	}
	slices.SortFunc(due, func(a, b *timer) int {
		return cmp.Or(a.when.Compare(b.when), cmp.Compare(a.seq, b.seq))
	})
	for _, t := range due {
		select {
		case t.c <- t.when:
		default: // the reader is behind: drop, as the runtime does
		}
		if t.period == 0 {
			delete(m.mu.pending, t)
			continue
		}
		// the first tick after now: missed ticks are skipped
		t.when = t.when.Add(t.period * (1 + m.mu.now.Sub(t.when)/t.period))
	}
}

// stopLocked disarms t and drains its channel. It reports whether t was
// armed or had a value not yet received.
func (m *Manual) stopLocked(t *timer) bool {
	_, active := m.mu.pending[t]
	delete(m.mu.pending, t)
	select {
	case <-t.c:
		active = true
	default:
	}
	return active
}

// timer is a Manual's timer; as a ticker it has a period.
type timer struct {
	m *Manual
	c chan time.Time
	// guarded by m.mu:
	period time.Duration // 0 for a timer
	when   time.Time     // the next deadline, while pending
	seq    uint64        // when it was last armed
}

func (t *timer) C() <-chan time.Time { return t.c }

func (t *timer) Stop() bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	return t.m.stopLocked(t)
}

func (t *timer) Reset(d time.Duration) bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	active := t.m.stopLocked(t)
	t.m.armLocked(t, d)
	return active
}

// ticker is a timer with a period, behind the Ticker interface.
type ticker timer

func (t *ticker) C() <-chan time.Time { return t.c }

func (t *ticker) Stop() { (*timer)(t).Stop() }

func (t *ticker) Reset(d time.Duration) {
	if d <= 0 {
		panic("clocktest: non-positive interval for Ticker.Reset")
	}
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	t.m.stopLocked((*timer)(t))
	t.period = d
	t.m.armLocked((*timer)(t), d)
}
