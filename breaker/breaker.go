package breaker

import (
	"errors"
	"sync/atomic"

	"github.com/sony/gobreaker/v2"
)

// Errors of this package.
var (
	// ErrOpen is returned by [Breaker.Allow] when the call must not be
	// made: the breaker is open, or half-open with all probes taken.
	ErrOpen = errors.New("breaker: open")
	// ErrExcused, reported to a done func (alone or wrapped), says the call
	// ended without telling anything about the dependency: the caller's
	// own deadline or cancellation cut it short, or this process was
	// descheduled while it waited. The call counts as neither a success nor
	// a failure, and a probe reported so frees its slot.
	ErrExcused = errors.New("breaker: not the dependency's fault")
)

// State is where a [Breaker] is in its cycle.
type State int

// The states of a [Breaker]. Their numeric values are not the ones exported
// in the weir_breaker_state gauge; see [Set].
const (
	// Closed lets every call through and counts failures.
	Closed State = iota
	// Open rejects every call with [ErrOpen] until [Config.OpenFor] has
	// passed.
	Open
	// HalfOpen lets up to [Config.HalfOpenProbes] probe calls through and
	// rejects the rest.
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

func fromGobreaker(s gobreaker.State) State {
	switch s {
	case gobreaker.StateOpen:
		return Open
	case gobreaker.StateHalfOpen:
		return HalfOpen
	}
	return Closed
}

// Breaker is a circuit breaker for one dependency (a Redis endpoint, a peer
// node). It is safe for concurrent use.
//
// The state machine is sony/gobreaker's two-step breaker: one mutex per
// breaker, taken by Allow and by done, and a generation that makes outcomes
// reported after a transition count for nothing. This package adds the trip
// rules of [Config], [ErrExcused], and done funcs that ignore a second call.
type Breaker struct {
	name string
	cb   *gobreaker.TwoStepCircuitBreaker[struct{}]
}

// New returns a closed breaker. name identifies it to onChange. onChange,
// if not nil, is called on every transition, synchronously and in order,
// with the breaker's lock held: it must be quick and must not call Allow,
// State or a done func of this breaker.
//
// It returns an error if cfg is invalid.
func New(name string, cfg Config, onChange func(name string, from, to State)) (*Breaker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	st := gobreaker.Settings{
		Name:         name,
		MaxRequests:  uint32(cfg.HalfOpenProbes),
		Interval:     cfg.Window,
		BucketPeriod: cfg.Window / windowBuckets,
		Timeout:      cfg.OpenFor,
		ReadyToTrip:  readyToTrip(cfg),
		IsExcluded:   func(err error) bool { return errors.Is(err, ErrExcused) },
	}
	if onChange != nil {
		st.OnStateChange = func(name string, from, to gobreaker.State) {
			onChange(name, fromGobreaker(from), fromGobreaker(to))
		}
	}
	return &Breaker{name: name, cb: gobreaker.NewTwoStepCircuitBreaker[struct{}](st)}, nil
}

// readyToTrip is the trip rule of cfg, over the calls of the current
// window (excused calls are not in TotalSuccesses or TotalFailures).
func readyToTrip(cfg Config) func(gobreaker.Counts) bool {
	return func(c gobreaker.Counts) bool {
		if int(c.ConsecutiveFailures) >= cfg.ConsecutiveFailures {
			return true
		}
		finished := uint64(c.TotalSuccesses) + uint64(c.TotalFailures)
		return finished >= uint64(cfg.MinRequests) &&
			float64(c.TotalFailures) >= cfg.FailureRate*float64(finished)
	}
}

// Name returns the name the breaker was created with.
func (b *Breaker) Name() string { return b.name }

// State returns the current state. An open breaker whose OpenFor has passed
// reports HalfOpen (and makes that transition).
func (b *Breaker) State() State { return fromGobreaker(b.cb.State()) }

// Allow asks whether a call to the dependency may be made now.
//
// If err is [ErrOpen], do not make the call; done is a no-op. Otherwise make
// the call and then report its outcome with done(err) exactly once:
//
//   - nil for success, including errors the dependency returned correctly
//     (a "not owner" reply is a healthy peer);
//   - an error wrapping [ErrExcused] when the call says nothing about the
//     dependency: the caller's own context ended, the caller's deadline
//     (not the dependency's slowness) bounded the wait, or this process was
//     descheduled past the call's deadline;
//   - any other error for a failure of the dependency: a refused or reset
//     connection, an unavailable peer, or a timeout that the dependency's
//     own latency budget bounded.
//
// Calling done more than once is harmless: calls after the first are
// ignored. An outcome reported after the breaker has moved to another state
// is ignored too. A probe whose done is never called holds its half-open
// slot for good, so always call done.
func (b *Breaker) Allow() (done func(err error), err error) {
	report, err := b.cb.Allow()
	if err != nil {
		return func(error) {}, ErrOpen
	}
	var called atomic.Bool
	return func(err error) {
		if called.CompareAndSwap(false, true) {
			report(err)
		}
	}, nil
}
