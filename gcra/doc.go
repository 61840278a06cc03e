// Package gcra implements the Generic Cell Rate Algorithm as pure functions.
//
// A limit is an emission interval T (the time one unit of cost "costs") and a
// burst B (how many units may pass at once after a quiet period). The whole
// state of one key is a single number, its theoretical arrival time (TAT): the
// instant at which the key would be fully rested had every admitted unit
// arrived exactly on schedule. A request of cost c at time now is admitted when
//
//	max(TAT, now) + c*T - B*T <= now
//
// and admitting it moves TAT to max(TAT, now) + c*T. This is a token bucket of
// capacity B refilled at one unit per T, stored as one integer.
//
// Everything here takes the current time as an argument and performs no I/O,
// locking, logging or clock reads: state, now and request in; new state and
// result out. Callers own storage, clocks and concurrency.
//
// Time base, resolution and range: every time here (now, TAT, Interval,
// RetryAfter, ResetAfter) is an int64 count of nanoseconds; callers use Unix
// nanoseconds. The emission interval is a whole number of nanoseconds, so a
// rate of n per period is enforced as one unit per ceil(period/n) ns: never
// above what was asked, and below it by less than 1/Interval, which is under
// 0.1 % for every rate up to 1,000,000/s (999,999/s becomes one per 1001 ns,
// 0.0999 % slow) and exact for 1,000,000/s. Interval*Burst (the span) is at
// most [MaxSpan], 2^62 ns (about 146 years). now is clamped to [0,
// [MaxTime]] (MaxInt64 - MaxSpan, about the year 2116), a negative TAT reads
// as rested, and the arithmetic works on how far a key is ahead of now, so
// no input wraps: a TAT at the top of the int64 range keeps its key denied. Stores with a smaller range (redisbackend computes in Lua doubles)
// bound spans further; policy bounds them for every store.
//
// Usage:
//
//	lim, _ := gcra.PerPeriod(5, time.Second, 3) // 5/s, burst 3
//	res, _ := gcra.Decide(tat, time.Now().UnixNano(), lim, 1)
//	if res.Allowed {
//		tat = res.TAT // persist the new state
//	}
//
// For several limits that must pass together (a tenant limit and a user limit
// within it) use [DecideComposite]: every limit is evaluated first and the
// request is admitted only if all admit it, so state is committed for all or
// for none.
//
// For a cost known only after the work (an LLM's tokens), [Reserve]
// charges the most it may be and [Settle] charges the actual cost later:
// it gives back the unused units, as far as the decisions admitted since
// allow (over every window, admitted minus refunded stays within
// B + W/T), or charges the excess, never more than one burst of debt. A
// key that settles keeps a second number beside its TAT, the shift
// counter; see [Settle] for the invariant and its proof.
//
// A cost larger than a limit's burst can never pass, however long the caller
// waits. That is reported as [Result.TooCostly], never as a retry-after: the
// RetryAfter of a TooCostly result, single or composite, is zero, even when
// another limit of the composite is also busy.
package gcra
