package gcra

import (
	"errors"
	"fmt"
	"time"
)

// MaxSpan bounds Interval*Burst, the longest time a key can be ahead of now.
// Keeping it at 2^61 microseconds (~73,000 years) leaves headroom so that
// now + Interval*cost can never overflow int64 for any realistic now.
const MaxSpan = int64(1) << 61

var (
	// ErrInvalidCost is returned when cost is zero or negative.
	ErrInvalidCost = errors.New("gcra: cost must be positive")
	// ErrInvalidLimit is returned for a limit that fails [Limit.Validate].
	ErrInvalidLimit = errors.New("gcra: invalid limit")
)

// Limit is one rate limit: one unit of cost every Interval microseconds on
// average, with at most Burst units at once.
type Limit struct {
	// Interval is the emission interval T in microseconds, > 0.
	Interval int64
	// Burst is the bucket capacity B in units, >= 1.
	Burst int64
}

// Validate reports whether l can be used in a decision. It changes nothing.
func (l Limit) Validate() error {
	switch {
	case l.Interval <= 0:
		return fmt.Errorf("%w: interval %dus must be positive", ErrInvalidLimit, l.Interval)
	case l.Burst <= 0:
		return fmt.Errorf("%w: burst %d must be positive", ErrInvalidLimit, l.Burst)
	case l.Interval > MaxSpan/l.Burst:
		return fmt.Errorf("%w: interval %dus times burst %d exceeds %dus", ErrInvalidLimit, l.Interval, l.Burst, MaxSpan)
	}
	return nil
}

// Span is Interval*Burst: how far ahead of now a key's TAT may run.
func (l Limit) Span() int64 { return l.Interval * l.Burst }

// PerPeriod builds the limit "n units per period, burst burst". The interval
// is rounded up to a whole microsecond, so a rate that does not divide evenly
// (3 per second) is enforced very slightly below, never above, what was asked.
func PerPeriod(n int64, period time.Duration, burst int64) (Limit, error) {
	if n <= 0 || period <= 0 {
		return Limit{}, fmt.Errorf("%w: rate %d per %s must be positive", ErrInvalidLimit, n, period)
	}
	us := period.Microseconds()
	if us <= 0 {
		return Limit{}, fmt.Errorf("%w: period %s is shorter than a microsecond", ErrInvalidLimit, period)
	}
	iv := us / n
	if us%n != 0 {
		iv++
	}
	l := Limit{Interval: iv, Burst: burst}
	return l, l.Validate()
}

// Result is the outcome of one decision.
type Result struct {
	// Allowed reports whether the request was admitted.
	Allowed bool
	// TooCostly reports that the cost exceeds the burst of (at least one)
	// limit: the request can never pass, so RetryAfter is zero and must not be
	// read as "try again". Allowed is false whenever TooCostly is true.
	TooCostly bool
	// TAT is the key's state after the decision. It equals the input TAT when
	// the request was denied, so callers may store it unconditionally.
	TAT int64
	// RetryAfter is, for a denied request, the exact wait in microseconds
	// after which the same request would be admitted (if nothing else
	// arrives). Zero when allowed or TooCostly.
	RetryAfter int64
	// Remaining is how many units of cost could be admitted right now, after
	// this decision.
	Remaining int64
	// ResetAfter is how long in microseconds until the key is fully rested
	// (Remaining == Burst), after this decision.
	ResetAfter int64
}

// Decide evaluates one request of cost against one limit whose state is tat,
// at time now (microseconds on the caller's time base). A tat of zero or any
// value at or before now means "rested". A clock that moves backwards is
// harmless: a tat ahead of now only makes the decision stricter.
func Decide(tat, now int64, l Limit, cost int64) (Result, error) {
	if cost <= 0 {
		return Result{}, fmt.Errorf("%w: got %d", ErrInvalidCost, cost)
	}
	if err := l.Validate(); err != nil {
		return Result{}, err
	}
	return decide(tat, now, l, cost), nil
}

// decide assumes cost > 0 and a valid limit.
func decide(tat, now int64, l Limit, cost int64) Result {
	base := max(tat, now)
	if cost > l.Burst {
		return Result{TooCostly: true, TAT: tat, Remaining: remaining(base, now, l), ResetAfter: base - now}
	}
	newTAT := base + l.Interval*cost
	allowAt := newTAT - l.Span()
	if allowAt > now {
		return Result{TAT: tat, RetryAfter: allowAt - now, Remaining: remaining(base, now, l), ResetAfter: base - now}
	}
	return Result{Allowed: true, TAT: newTAT, Remaining: remaining(newTAT, now, l), ResetAfter: newTAT - now}
}

// remaining is the number of whole units that fit between now and the
// earliest instant a key at TAT base would admit one more: floor((now + B*T -
// base) / T), never negative. base >= now always holds here.
func remaining(base, now int64, l Limit) int64 {
	ahead := base - now // 0 <= ahead <= Span, by construction
	if ahead >= l.Span() {
		return 0
	}
	return (l.Span() - ahead) / l.Interval
}

// Math helpers kept here so callers converting to other units agree on
// rounding.

// CeilSeconds converts a duration in microseconds to whole seconds, rounding
// up, as HTTP's Retry-After requires. Non-positive inputs give zero.
func CeilSeconds(us int64) int64 {
	if us <= 0 {
		return 0
	}
	return (us-1)/1_000_000 + 1
}
