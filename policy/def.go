package policy

import (
	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
)

// Def returns the limit's identity as decisions carry it (decide.Def):
// built once when the policy is compiled, so every request of the limit
// shares it and no layer below the limiter parses it back out of a key.
// A Limit not built by a policy (a test's literal) gets a new Def each
// call. Safe for concurrent use.
func (l *Limit) Def() *decide.Def {
	if l.def != nil {
		return l.def
	}
	return newDef(l)
}

func newDef(l *Limit) *decide.Def {
	return &decide.Def{Name: l.Name, Global: l.Scope == ScopeGlobal, Strict: l.Consistency == ConsistencyStrict,
		Shadow: l.Shadow, Lease: l.Lease,
		Concurrency: l.Kind == KindConcurrency, ReserveTTL: l.ReserveTTL.Nanoseconds()}
}

// buildDefs gives every limit of p its Def; call once p's limits are final.
func (p *Policy) buildDefs() {
	for _, l := range p.Limits {
		l.def = newDef(l)
	}
}

// KeyLimit is ParamsForKey and LimitOfKey in one parse of key: the limit
// that built key (nil with KeyUnknown) and the numbers the policy gives it
// (see ParamsForKey). The owner's validation of forwarded keys calls it
// once per key. Safe for concurrent use.
func (p *Policy) KeyLimit(key string) (*Limit, []gcra.Limit, KeyMatch) {
	l, parts, ok := p.limitOfKey(key)
	if !ok {
		return nil, nil, KeyUnknown
	}
	set, how := p.paramsOf(l, parts)
	return l, set, how
}
