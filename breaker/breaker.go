package breaker

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// ErrOpen is returned by [Breaker.Allow] when the call must not be made:
// the breaker is open, or half-open with all probe slots taken.
var ErrOpen = errors.New("breaker: open")

// State is where a [Breaker] is in its cycle.
type State int

// The states of a [Breaker]. Their numeric values are not the ones exported
// in the weir_breaker_state gauge; see [Set].
const (
	// Closed lets every call through and counts consecutive failures.
	Closed State = iota
	// Open rejects every call with [ErrOpen] until [Config.OpenFor] has
	// passed.
	Open
	// HalfOpen lets up to [Config.HalfOpenProbes] probe calls through at
	// once and rejects the rest.
	HalfOpen
)

// String returns "closed", "open" or "half_open".
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half_open"
	}
	return "unknown"
}

// word packs what the closed fast path needs into one atomic value, so that
// Allow is a single load and a closed-state done a compare-and-swap:
//
//	bits  0..1   state
//	bits  2..31  consecutive failures (closed only; capped at the threshold)
//	bits 32..63  epoch, bumped on every transition
//
// The epoch lets a done func recognise that the period it was admitted in
// is over, so late outcomes are ignored rather than counted against a newer
// period.
type word uint64

const failureMask = 1<<30 - 1

func pack(epoch uint32, s State, failures int) word {
	return word(epoch)<<32 | word(failures&failureMask)<<2 | word(s)
}

func (w word) state() State   { return State(w & 3) }
func (w word) failures() int  { return int(w>>2) & failureMask }
func (w word) epoch() uint32  { return uint32(w >> 32) }
func noop(error)              {}
func (b *Breaker) load() word { return word(b.word.Load()) }

// Breaker is a circuit breaker for one dependency (a Redis endpoint, a peer
// node). It is safe for concurrent use.
//
// Concurrency: the state word is atomic and, while closed, Allow and done
// touch nothing else, so the hot path takes no lock. Every transition, and
// all half-open bookkeeping, happens under mu; the word is only stored with
// mu held, and lock-free writers (closed-state done) use compare-and-swap
// so they lose to any transition.
type Breaker struct {
	name     string
	cfg      Config
	now      func() time.Time
	onChange func(name string, from, to State)

	word atomic.Uint64
	// openUntil is when the current open period ends, so that rejecting
	// while open needs no lock either. Set under mu before the word.
	openUntil atomic.Pointer[time.Time]

	mu struct {
		sync.Mutex
		probes    int // probe calls in flight while half-open
		successes int // successful probes in this half-open period
	}
}

// New returns a closed breaker. name identifies it to onChange. now is the
// clock; it must be safe for concurrent use. onChange, if not nil, is called
// on every transition, synchronously and in order, with the breaker's lock
// held: it must be quick and must not call Allow or a done func of this
// breaker (State is fine).
//
// New panics if cfg is invalid (check it with [Config.Validate] first) or
// now is nil, as these are programming errors.
func New(name string, cfg Config, now func() time.Time, onChange func(name string, from, to State)) *Breaker {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	if now == nil {
		panic("breaker: a clock is required")
	}
	return &Breaker{name: name, cfg: cfg, now: now, onChange: onChange}
}

// State returns the current state. An open breaker whose OpenFor has passed
// still reports Open until the next Allow moves it to HalfOpen.
func (b *Breaker) State() State { return b.load().state() }

// Allow asks whether a call to the dependency may be made now.
//
// If err is [ErrOpen], do not make the call; done is a no-op. Otherwise make
// the call and then report its outcome with done(err) exactly once: nil for
// success, non-nil for a failure of the dependency. Report errors that are
// not the dependency's fault as done(nil) — most importantly the caller's
// own context being cancelled, and errors the dependency returned correctly
// (a "not owner" reply is a healthy peer). Report a timeout of the call's
// own deadline as a failure: that is what a dead dependency looks like.
//
// Calling done more than once is harmless: calls after the first are
// ignored. An outcome reported after the breaker has moved to another
// period (for example a slow call admitted while closed that finishes after
// the breaker opened) is ignored too. A probe whose done is never called
// holds its half-open slot for good, so always call done.
//
// While closed, Allow is one atomic load and takes no lock; it allocates
// the done func (two small objects, 36 bytes), which is the price of
// ignoring a second call: a shared preallocated func could not tell a
// duplicate from another call's outcome.
func (b *Breaker) Allow() (done func(err error), err error) {
	if w := b.load(); w.state() == Closed {
		return b.closedCall(w.epoch()), nil
	}
	return b.allowSlow()
}

// closedCall returns the done func of a call admitted while closed in
// epoch.
func (b *Breaker) closedCall(epoch uint32) func(error) {
	var called atomic.Bool
	return func(err error) {
		if called.CompareAndSwap(false, true) {
			b.closedDone(epoch, err)
		}
	}
}

// closedDone records the outcome of a call admitted while closed in epoch.
func (b *Breaker) closedDone(epoch uint32, err error) {
	for {
		w := b.load()
		if w.state() != Closed || w.epoch() != epoch {
			return // the period the call belonged to is over
		}
		n := w.failures()
		next := 0
		switch {
		case err == nil && n == 0:
			return
		case err == nil:
			next = 0
		case n >= b.cfg.FailureThreshold:
			return // already tripping
		default:
			next = n + 1
		}
		if b.word.CompareAndSwap(uint64(w), uint64(pack(epoch, Closed, next))) {
			if next == b.cfg.FailureThreshold {
				b.trip(epoch)
			}
			return
		}
	}
}

// trip opens the breaker if it is still closed in epoch: that epoch saw
// FailureThreshold consecutive failures, whatever happened since.
func (b *Breaker) trip(epoch uint32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w := b.load(); w.state() == Closed && w.epoch() == epoch {
		b.setLocked(Open)
	}
}

// allowSlow is Allow when the breaker was not closed at the first look.
func (b *Breaker) allowSlow() (func(error), error) {
	if w := b.load(); w.state() == Open && b.now().Before(*b.openUntil.Load()) {
		return noop, ErrOpen // the common rejection, without the lock
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.load()
	switch w.state() {
	case Closed: // closed since the first look
		return b.closedCall(w.epoch()), nil
	case Open:
		if b.now().Before(*b.openUntil.Load()) {
			return noop, ErrOpen
		}
		b.setLocked(HalfOpen)
	}
	if b.mu.probes >= b.cfg.HalfOpenProbes {
		return noop, ErrOpen
	}
	b.mu.probes++
	epoch := b.load().epoch()
	var called atomic.Bool
	return func(err error) {
		if called.CompareAndSwap(false, true) {
			b.probeDone(epoch, err)
		}
	}, nil
}

// probeDone records the outcome of a probe admitted while half-open in
// epoch.
func (b *Breaker) probeDone(epoch uint32, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w := b.load(); w.state() != HalfOpen || w.epoch() != epoch {
		return
	}
	if err != nil {
		b.setLocked(Open)
		return
	}
	b.mu.probes--
	b.mu.successes++
	if b.mu.successes >= b.cfg.HalfOpenProbes {
		b.setLocked(Closed)
	}
}

// setLocked moves the breaker to state to, starting a new epoch with no
// failures and no probes. b.mu must be held.
func (b *Breaker) setLocked(to State) {
	from := b.load()
	if to == Open {
		until := b.now().Add(b.cfg.OpenFor)
		b.openUntil.Store(&until)
	}
	b.mu.probes, b.mu.successes = 0, 0
	b.word.Store(uint64(pack(from.epoch()+1, to, 0)))
	if b.onChange != nil {
		b.onChange(b.name, from.state(), to)
	}
}
