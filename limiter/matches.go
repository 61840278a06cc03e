package limiter

import (
	"context"
	"fmt"

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
// nothing. No matches is an unmatched, allowed decision.
func (l *Limiter) DecideMatches(ctx context.Context, p *policy.Policy, ms []policy.Match, cost int64) (Decision, error) {
	if err := validate(Request{Cost: cost}); err != nil {
		return Decision{}, err
	}
	for i := 1; i < len(ms); i++ {
		if ms[i].GroupValue != ms[0].GroupValue {
			return Decision{}, fmt.Errorf("%w: limits %q and %q have different groups", ErrInvalidRequest, ms[0].Limit.Name, ms[i].Limit.Name)
		}
	}
	return l.decide(ctx, p, ms, cost, l.now().UnixNano())
}
