package limiter

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/weirhq/weir/policy"
)

// validate checks a request's shape against the input bounds. It reads the
// request only.
func validate(r Request) error {
	if r.Cost < 1 {
		return fmt.Errorf("%w: cost %d must be at least 1", ErrInvalidRequest, r.Cost)
	}
	if r.Cost > MaxCost {
		return fmt.Errorf("%w: cost %d exceeds %d", ErrInvalidRequest, r.Cost, MaxCost)
	}
	if len(r.Descriptors) > MaxDescriptors {
		return fmt.Errorf("%w: %d descriptors exceed %d", ErrInvalidRequest, len(r.Descriptors), MaxDescriptors)
	}
	for k, v := range r.Descriptors {
		switch {
		case k == "":
			return fmt.Errorf("%w: empty descriptor name", ErrInvalidRequest)
		case len(k) > MaxDescriptorBytes:
			return fmt.Errorf("%w: descriptor name %.32q... is %d bytes, over %d", ErrInvalidRequest, k, len(k), MaxDescriptorBytes)
		case len(v) > MaxDescriptorBytes:
			return fmt.Errorf("%w: descriptor %q value is %d bytes, over %d", ErrInvalidRequest, k, len(v), MaxDescriptorBytes)
		case !utf8.ValidString(k) || !utf8.ValidString(v):
			return fmt.Errorf("%w: descriptor %q is not valid UTF-8", ErrInvalidRequest, k)
		}
	}
	return nil
}

// resolve appends to dst the matches of desc against p and checks that
// they can be decided together: one composite decision needs one group.
// Only the matches it appends are checked (a batch resolves its requests
// into one slice).
func resolve(p *policy.Policy, desc map[string]string, dst []policy.Match) ([]policy.Match, error) {
	all, err := p.Resolve(desc, dst)
	if err != nil {
		if errors.Is(err, policy.ErrUnknownDescriptor) {
			return nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
		}
		return nil, err
	}
	ms := all[len(dst):]
	for i := 1; i < len(ms); i++ {
		if ms[i].GroupValue != ms[0].GroupValue {
			return nil, fmt.Errorf("%w: limits %q (group %q) and %q (group %q) both match but a composite decision needs one group; give them the same group descriptor",
				ErrInvalidRequest, ms[0].Limit.Name, ms[0].GroupValue, ms[i].Limit.Name, ms[i].GroupValue)
		}
	}
	return all, mixedConsistency(ms)
}

// mixedConsistency refuses a request whose enforced limits mix fast and
// strict. Their composite would go to Redis whole, while other requests
// decide the fast keys in owner memory: one key counted in two stores. The
// policy refuses fast and strict limits that share a group descriptor, so
// this only meets limits of different group descriptors whose values a
// request made equal.
func mixedConsistency(ms []policy.Match) error {
	var fast, strict *policy.Limit
	for _, m := range ms {
		switch {
		case m.Shadow: // decided on its own, in its own store
		case m.Limit.Consistency == policy.ConsistencyStrict:
			strict = m.Limit
		default:
			fast = m.Limit
		}
	}
	if fast != nil && strict != nil {
		return fmt.Errorf("%w: limits %q (fast) and %q (strict) both match with one group value; a request may not mix them, as %q's keys are decided in owner memory",
			ErrInvalidRequest, fast.Name, strict.Name, fast.Name)
	}
	return nil
}

// checkReserve refuses a reserving request whose enforced limits include
// one a reservation cannot be kept on: a strict limit (decided by Redis,
// whose script does not settle) or a global one (shared between regions).
// Shadow limits never reserve, so they are not checked.
func checkReserve(reserve bool, ms []policy.Match) error {
	if !reserve {
		return nil
	}
	for _, m := range ms {
		switch {
		case m.Shadow:
		case m.Limit.Consistency == policy.ConsistencyStrict:
			return fmt.Errorf("%w: reserve on limit %q, which is consistency: strict; reservations are kept for fast limits only", ErrInvalidRequest, m.Limit.Name)
		case m.Limit.Scope == policy.ScopeGlobal:
			return fmt.Errorf("%w: reserve on limit %q, which is scope: global; reservations are kept for regional limits only", ErrInvalidRequest, m.Limit.Name)
		}
	}
	return nil
}
