package gcra

import "fmt"

// DecideComposite evaluates one request of cost against several limits that
// must all admit it. tats[i] is the state of limits[i]; per-limit results
// are written to out[i] (len(out) must be >= len(limits), so a caller can
// reuse a buffer and decide without allocating).
//
// Every limit is evaluated before anything is committed. The request is
// admitted only if every limit admits it; then out[i].TAT holds each new
// state. Otherwise every out[i].TAT equals tats[i] (nothing is consumed) and
// out[i] describes what that limit alone would say with no units consumed.
//
// The returned aggregate has the overall verdict, the largest RetryAfter and
// ResetAfter, and the smallest Remaining. Its TAT field is meaningless.
// TooCostly is set when the cost exceeds any limit's burst; the request can
// then never pass, so the aggregate's RetryAfter is zero even when another
// limit, alone, would have named a wait (that limit's out[i] still does).
func DecideComposite(tats []int64, now int64, limits []Limit, cost int64, out []Result) (Result, error) {
	if cost <= 0 {
		return Result{}, fmt.Errorf("%w: got %d", ErrInvalidCost, cost)
	}
	if len(tats) != len(limits) || len(out) < len(limits) {
		return Result{}, fmt.Errorf("gcra: %d states and %d result slots for %d limits", len(tats), len(out), len(limits))
	}
	if len(limits) == 0 {
		return Result{}, fmt.Errorf("gcra: no limits")
	}
	for i, l := range limits {
		if err := l.Validate(); err != nil {
			return Result{}, fmt.Errorf("limit %d: %w", i, err)
		}
	}
	agg := Result{Allowed: true, Remaining: -1}
	for i, l := range limits {
		r := decide(tats[i], now, l, cost)
		out[i] = r
		agg.Allowed = agg.Allowed && r.Allowed
		agg.TooCostly = agg.TooCostly || r.TooCostly
		agg.RetryAfter = max(agg.RetryAfter, r.RetryAfter)
	}
	if agg.TooCostly {
		agg.RetryAfter = 0 // no wait makes the request pass
	}
	if !agg.Allowed {
		// Roll back the limits that alone would have admitted: report them
		// as they stand with nothing consumed.
		for i, l := range limits {
			if out[i].Allowed {
				out[i] = restingAt(tats[i], now, l)
			}
		}
	}
	for i := range limits {
		if agg.Remaining < 0 || out[i].Remaining < agg.Remaining {
			agg.Remaining = out[i].Remaining
		}
		agg.ResetAfter = max(agg.ResetAfter, out[i].ResetAfter)
	}
	return agg, nil
}
