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
// Everything here works in integer microseconds, takes the current time as an
// argument and performs no I/O, locking, logging or clock reads: state, now
// and request in; new state and result out. Callers own storage, clocks and
// concurrency.
//
// Usage:
//
//	lim, _ := gcra.PerPeriod(5, time.Second, 3) // 5/s, burst 3
//	res, _ := gcra.Decide(tat, now, lim, 1)
//	if res.Allowed {
//		tat = res.TAT // persist the new state
//	}
//
// For several limits that must pass together (a tenant limit and a user limit
// within it) use [DecideComposite]: every limit is evaluated first and the
// request is admitted only if all admit it, so state is committed for all or
// for none.
//
// A cost larger than a limit's burst can never pass, however long the caller
// waits. That is reported as [Result.TooCostly], never as a retry-after.
package gcra
