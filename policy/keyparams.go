package policy

import (
	"fmt"
	"time"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/limitkey"
)

// The ranges a policy accepts for a limit's numbers, as GCRA parameters.
// Every limit, tier, override and fallback of a valid Policy lies within
// them; CheckParams holds numbers from elsewhere (forwarded work) to them.
const (
	// MinInterval is the emission interval of the fastest accepted rate,
	// maxPerSecond units per second, in nanoseconds.
	MinInterval = int64(time.Second) / maxPerSecond
	// MaxInterval is the emission interval of one unit per day, in
	// nanoseconds: the slowest rate unit a policy may use is N/d (this
	// bound must stay at or above every rate ParseRate accepts).
	MaxInterval = int64(24 * time.Hour)
	// MaxSpan bounds a limit's span, interval times burst: how far ahead of
	// now one key may run, and how long a spent key takes to rest. 50 days
	// keeps every TAT computation exact in every store (redisbackend's
	// script computes in Lua doubles, exact below 2^53 ns, about 104 days)
	// and far from int64's range; "1/h burst 1e7" (1,141 years) is refused
	// at load instead of overflowing later.
	MaxSpan = int64(50 * 24 * time.Hour)
)

// CheckParams reports whether l lies within the ranges a policy accepts: an
// interval in [MinInterval, MaxInterval] and a burst of at least 1 whose
// span (interval times burst) is at most MaxSpan. The error wraps
// ErrInvalid. It changes nothing.
func CheckParams(l gcra.Limit) error {
	if l.Interval < MinInterval || l.Interval > MaxInterval {
		return &invalidError{msg: fmt.Sprintf("policy: interval %dns outside [%d, %d]", l.Interval, MinInterval, MaxInterval)}
	}
	if err := l.Validate(); err != nil {
		return &invalidError{msg: "policy: " + err.Error()}
	}
	if l.Span() > MaxSpan {
		return &invalidError{msg: fmt.Sprintf("policy: span (interval times burst) %s exceeds %s", time.Duration(l.Span()), time.Duration(MaxSpan))}
	}
	return nil
}

// KeyMatch says how much a policy knows about a key it is asked about.
type KeyMatch int

const (
	// KeyUnknown: no limit of the policy builds this key (another policy
	// version, or not a key of this policy's shape).
	KeyUnknown KeyMatch = iota
	// KeyExact: the key names its limit and its tenant, so the policy
	// gives exactly one set of numbers for it.
	KeyExact
	// KeyAmbiguous: the key names a limit whose key does not carry the
	// tenant descriptor while tenants or tiers give that limit different
	// numbers, so the numbers depend on a descriptor the key does not hold.
	// The returned set is every value the policy can give the limit.
	KeyAmbiguous
)

// ParamsForKey returns the numbers this policy gives the limit that built
// key (see Resolve for the key's shape), after the tenant's tier and
// overrides when the key carries the tenant. With KeyExact the slice holds
// the one answer; with KeyAmbiguous every value the limit may have; with
// KeyUnknown it is nil. The slice must not be modified. Safe for concurrent
// use; it allocates only the answer for a key that carries its tenant, and
// to unescape a tenant value that needed escaping.
func (p *Policy) ParamsForKey(key string) ([]gcra.Limit, KeyMatch) {
	_, set, how := p.KeyLimit(key)
	return set, how
}

// paramsOf is ParamsForKey for limit l of a key cut into parts.
func (p *Policy) paramsOf(l *Limit, parts limitkey.Parts) ([]gcra.Limit, KeyMatch) {
	li := p.keys.limitIndex[l]
	if len(p.tenants) == 0 || p.tenantIdx < 0 {
		return p.keys.paramSets[li][:1:1], KeyExact // the base profile; see indexParams
	}
	for j, di := range l.match {
		if di != p.tenantIdx {
			continue
		}
		prof, found := p.tenants[limitkey.Unescape(parts.Value(j))]
		if !found {
			prof = p.base
		}
		return []gcra.Limit{prof[li].params}, KeyExact
	}
	if set := p.keys.paramSets[li]; len(set) > 1 {
		return set, KeyAmbiguous
	}
	return p.keys.paramSets[li], KeyExact
}

// limitOfKey finds the limit that built key and the key's fields, without
// allocating.
func (p *Policy) limitOfKey(key string) (*Limit, limitkey.Parts, bool) {
	parts, ok := limitkey.Split(key)
	if !ok {
		return nil, limitkey.Parts{}, false
	}
	l := p.byName[parts.Name]
	if l == nil || parts.NumValues() != len(l.match) {
		return nil, limitkey.Parts{}, false
	}
	return l, parts, true
}

// keyIndex is what ParamsForKey needs beyond the profiles.
type keyIndex struct {
	limitIndex map[*Limit]int // position in Policy.Limits
	paramSets  [][]gcra.Limit // per limit: every value it may take, base first
}

// indexParams records, per limit, its position in p.Limits and the distinct
// numbers the base profile, every tier and every tenant give it (the base
// profile's first), so ParamsForKey answers without scanning tenants. Call
// once the profiles are built; it is linear in tenants times limits.
func (p *Policy) indexParams() {
	p.keys.limitIndex = make(map[*Limit]int, len(p.Limits))
	p.keys.paramSets = make([][]gcra.Limit, len(p.Limits))
	seen := make([]map[gcra.Limit]bool, len(p.Limits))
	for i, l := range p.Limits {
		p.keys.limitIndex[l] = i
		p.keys.paramSets[i] = []gcra.Limit{p.base[i].params}
		seen[i] = map[gcra.Limit]bool{p.base[i].params: true}
	}
	add := func(prof profile) {
		for i, e := range prof {
			if !seen[i][e.params] {
				seen[i][e.params] = true
				p.keys.paramSets[i] = append(p.keys.paramSets[i], e.params)
			}
		}
	}
	for _, prof := range p.tiers {
		add(prof)
	}
	for _, prof := range p.tenants {
		add(prof)
	}
}
