package limiter

import (
	"context"
	"fmt"
	"slices"

	"github.com/weirhq/weir/policy"
)

// Policy returns the policy Decide would use now. Transports that resolve
// requests themselves (Envoy RLS, see DecideMatches) read it once per
// request.
func (l *Limiter) Policy() *policy.Policy { return l.policies.Current() }

// DecideMatches decides matches a transport resolved itself from p (for
// example with policy.ResolveEnvoy) exactly as Decide decides the matches
// of a request: enforced limits as one composite, then shadow limits, with
// each limit's failure policy. cost must be at least 1. Errors wrapping
// ErrInvalidRequest (a bad cost, matches of several groups) consume
// nothing. No matches is an unmatched, allowed decision. A key listed more
// than once is decided and charged once (see the package doc); the Decision
// has one entry per distinct key, in first-seen order.
func (l *Limiter) DecideMatches(ctx context.Context, p *policy.Policy, ms []policy.Match, cost int64) (Decision, error) {
	if err := validate(Request{Cost: cost}); err != nil {
		return Decision{}, err
	}
	ms = distinctKeys(ms)
	for i := 1; i < len(ms); i++ {
		if ms[i].GroupValue != ms[0].GroupValue {
			return Decision{}, fmt.Errorf("%w: limits %q and %q have different groups", ErrInvalidRequest, ms[0].Limit.Name, ms[i].Limit.Name)
		}
	}
	return l.decide(ctx, p, ms, nil, ask{cost: cost, now: l.now().UnixNano()})
}

// distinctKeys returns ms without the matches whose key an earlier match
// already has. It returns ms itself when every key is distinct (the usual
// case: policy.Resolve builds one key per limit and a limit's name is part
// of its key), and a new slice otherwise, so the caller's is never written.
func distinctKeys(ms []policy.Match) []policy.Match {
	for i := 1; i < len(ms); i++ {
		for j := range i {
			if ms[j].Key == ms[i].Key {
				return dropRepeats(ms)
			}
		}
	}
	return ms
}

func dropRepeats(ms []policy.Match) []policy.Match {
	out := make([]policy.Match, 0, len(ms))
	for _, m := range ms {
		if !slices.ContainsFunc(out, func(o policy.Match) bool { return o.Key == m.Key }) {
			out = append(out, m)
		}
	}
	return out
}
