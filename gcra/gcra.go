package gcra

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// MaxSpan bounds Interval*Burst, the longest time a key can be ahead of now:
// 2^62 nanoseconds, about 146 years.
const MaxSpan = int64(1) << 62

// MaxTime is the latest now (Unix nanoseconds, about the year 2116) a
// decision works with. Decide and DecideComposite saturate: a now above
// MaxTime is read as MaxTime and a negative one as 0, and a negative TAT as
// rested. An admitted TAT is at most now + Span <= MaxInt64, and a TAT
// anywhere up to MaxInt64 only denies, so no TAT ever wraps around.
const MaxTime = math.MaxInt64 - MaxSpan

var (
	// ErrInvalidCost is returned when cost is zero or negative.
	ErrInvalidCost = errors.New("gcra: cost must be positive")
	// ErrInvalidLimit is returned for a limit that fails [Limit.Validate].
	ErrInvalidLimit = errors.New("gcra: invalid limit")
)

// Limit is one rate limit: one unit of cost every Interval nanoseconds on
// average, with at most Burst units at once.
type Limit struct {
	// Interval is the emission interval T in nanoseconds, > 0.
	Interval int64
	// Burst is the bucket capacity B in units, >= 1.
	Burst int64
}

// Validate reports whether l can be used in a decision. It changes nothing.
func (l Limit) Validate() error {
	switch {
	case l.Interval <= 0:
		return fmt.Errorf("%w: interval %dns must be positive", ErrInvalidLimit, l.Interval)
	case l.Burst <= 0:
		return fmt.Errorf("%w: burst %d must be positive", ErrInvalidLimit, l.Burst)
	case l.Interval > MaxSpan/l.Burst:
		return fmt.Errorf("%w: interval %dns times burst %d exceeds %dns", ErrInvalidLimit, l.Interval, l.Burst, MaxSpan)
	}
	return nil
}

// Span is Interval*Burst: how far ahead of now a key's TAT may run.
func (l Limit) Span() int64 { return l.Interval * l.Burst }

// PerPeriod builds the limit "n units per period, burst burst". The interval
// is period/n rounded up to a whole nanosecond, so a rate that does not
// divide evenly (3 per second) is enforced very slightly below, never above,
// what was asked: by less than one part in period/n nanoseconds, under 0.1 %
// for any rate up to 1,000,000 per second. A rate above one unit per
// nanosecond cannot be expressed and is refused.
func PerPeriod(n int64, period time.Duration, burst int64) (Limit, error) {
	if n <= 0 || period <= 0 {
		return Limit{}, fmt.Errorf("%w: rate %d per %s must be positive", ErrInvalidLimit, n, period)
	}
	ns := period.Nanoseconds()
	if n > ns {
		return Limit{}, fmt.Errorf("%w: rate %d per %s is faster than one per nanosecond", ErrInvalidLimit, n, period)
	}
	iv := ns / n
	if ns%n != 0 {
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
	// RetryAfter is, for a denied request, the exact wait in nanoseconds
	// after which the same request would be admitted (if nothing else
	// arrives). Zero when allowed or TooCostly.
	RetryAfter int64
	// Remaining is how many units of cost could be admitted right now, after
	// this decision.
	Remaining int64
	// ResetAfter is how long in nanoseconds until the key is fully rested
	// (Remaining == Burst), after this decision.
	ResetAfter int64
}

// Decide evaluates one request of cost against one limit whose state is tat,
// at time now (nanoseconds on the caller's time base). A tat of zero or any
// value at or before now means "rested". A clock that moves backwards is
// harmless: a tat ahead of now only makes the decision stricter. Any int64
// tat and now are accepted without overflow (see MaxTime).
func Decide(tat, now int64, l Limit, cost int64) (Result, error) {
	if cost <= 0 {
		return Result{}, fmt.Errorf("%w: got %d", ErrInvalidCost, cost)
	}
	if err := l.Validate(); err != nil {
		return Result{}, err
	}
	return decide(tat, now, l, cost), nil
}

// decide assumes cost > 0 and a valid limit. It works on how far the key
// is ahead of now, never on sums of absolute times, so no input overflows:
// now is clamped to [0, MaxTime] and a negative tat read as 0, and an
// admitted TAT is at most now + Span <= MaxTime + MaxSpan = MaxInt64. A key
// whose TAT sits at the top of the range stays denied instead of wrapping.
// A denial returns the caller's tat unchanged.
func decide(tat, now int64, l Limit, cost int64) Result {
	now = min(max(now, 0), MaxTime)
	ahead := max(tat, now) - now // >= 0; tat < 0 reads as rested
	if cost > l.Burst {
		return Result{TooCostly: true, TAT: tat, Remaining: remaining(ahead, l), ResetAfter: ahead}
	}
	need := l.Interval * cost // <= Span
	if room := l.Span() - need; ahead > room {
		return Result{TAT: tat, RetryAfter: ahead - room, Remaining: remaining(ahead, l), ResetAfter: ahead}
	}
	ahead += need
	return Result{Allowed: true, TAT: now + ahead, Remaining: remaining(ahead, l), ResetAfter: ahead}
}

// restingAt describes a key that nothing was charged to: what it admits at
// now with its TAT as it stands.
func restingAt(tat, now int64, l Limit) Result {
	now = min(max(now, 0), MaxTime)
	ahead := max(tat, now) - now
	return Result{Allowed: true, TAT: tat, Remaining: remaining(ahead, l), ResetAfter: ahead}
}

// remaining is the number of whole units that fit before a key ahead of
// now by ahead (>= 0) is full: floor((B*T - ahead) / T), never negative.
func remaining(ahead int64, l Limit) int64 {
	if ahead >= l.Span() {
		return 0
	}
	return (l.Span() - ahead) / l.Interval
}

// Math helpers kept here so callers converting to other units agree on
// rounding.

// CeilSeconds converts a duration in nanoseconds to whole seconds, rounding
// up, as HTTP's Retry-After requires. Non-positive inputs give zero.
func CeilSeconds(ns int64) int64 {
	if ns <= 0 {
		return 0
	}
	return (ns-1)/1_000_000_000 + 1
}

// CeilMicros converts a duration in nanoseconds to whole microseconds,
// rounding up, for wire formats that carry microseconds: a wait rounded
// this way is never shorter than the exact one. Non-positive inputs give
// zero.
func CeilMicros(ns int64) int64 {
	if ns <= 0 {
		return 0
	}
	return (ns-1)/1_000 + 1
}
