package policy

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/weirhq/weir/gcra"
)

// Validation bounds.
const (
	maxVersionBytes    = 128
	maxDescriptorBytes = 256 // a descriptor's name, and a tenant name (a value)
	maxMatch           = 32  // descriptors in one limit's match
)

var limitNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// numbers are a limit's adjustable settings while tiers and overrides are
// merged field by field: override over tier over the limit itself.
type numbers struct {
	rate   Rate
	burst  int64
	shadow bool
	params gcra.Limit // rate and burst, checked
}

// build checks fp and builds a Policy, recording every problem in c. The
// result is meaningful only when c holds no problems.
func build(c *checker, fp *filePolicy) *Policy {
	p := &Policy{Version: fp.Version, DefaultTier: fp.DefaultTier, tenantIdx: -1}
	if len(fp.Version) > maxVersionBytes || !utf8.ValidString(fp.Version) {
		c.addf("version", "must be valid UTF-8 of at most %d bytes", maxVersionBytes)
	}
	p.UnknownDescriptors = enumField(c, "unknown_descriptors", fp.UnknownDescriptors, "", UnknownReject, UnknownIgnore)
	p.TenantDescriptor = fp.TenantDescriptor
	if p.TenantDescriptor == "" {
		p.TenantDescriptor = "tenant"
	} else if len(p.TenantDescriptor) > maxDescriptorBytes {
		c.addf("tenant_descriptor", "longer than %d bytes", maxDescriptorBytes)
	}
	d := fp.Defaults
	def := Limit{
		Consistency: enumField(c, "defaults.consistency", d.Consistency, "", ConsistencyFast, ConsistencyStrict),
		OnFailure:   enumField(c, "defaults.on_failure", d.OnFailure, FailLocal, FailOpen, FailClosed, FailLocal),
		Scope:       enumField(c, "defaults.scope", d.Scope, "", ScopeRegion, ScopeGlobal),
	}
	if len(fp.Limits) == 0 {
		c.addf("limits", "at least one limit is required")
	}
	p.byName = make(map[string]*Limit, len(fp.Limits))
	for i := range fp.Limits {
		at := fmt.Sprintf("limits[%d]", i)
		if name := fp.Limits[i].Name; name != "" {
			at += fmt.Sprintf(" %q", name)
		}
		l := buildLimit(c, at, &fp.Limits[i], &def)
		if _, dup := p.byName[l.Name]; dup && l.Name != "" {
			c.addf(at, "name: %q is already used by an earlier limit", l.Name)
		}
		p.byName[l.Name] = l
		p.Limits = append(p.Limits, l)
	}
	indexDescriptors(p)
	checkConsistency(c, p)
	checkConcurrencyGroups(c, p)
	indexDomains(c, p)
	buildProfiles(c, p, fp)
	return p
}

// enumField parses a setting that must be one of allowed; "" means def, or
// allowed[0] when def is "".
func enumField[T ~string](c *checker, field, v string, def T, allowed ...T) T {
	if v == "" {
		if def != "" {
			return def
		}
		return allowed[0]
	}
	if i := slices.Index(allowed, T(v)); i >= 0 {
		return allowed[i]
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	last := len(names) - 1
	c.addf(field, "%q is not %s or %s", v, strings.Join(names[:last], ", "), names[last])
	return allowed[0]
}

func buildLimit(c *checker, at string, fl *fileLimit, def *Limit) *Limit {
	l := &Limit{
		Name: fl.Name, Match: slices.Clone(fl.Match), Group: fl.Group,
		Burst: fl.Burst, Shadow: fl.Shadow,
		Kind:        enumField(c, at+": kind", fl.Kind, "", KindRate, KindConcurrency),
		Consistency: enumField(c, at+": consistency", fl.Consistency, def.Consistency, ConsistencyFast, ConsistencyStrict),
		OnFailure:   enumField(c, at+": on_failure", fl.OnFailure, def.OnFailure, FailOpen, FailClosed, FailLocal),
		Scope:       enumField(c, at+": scope", fl.Scope, def.Scope, ScopeRegion, ScopeGlobal),
	}
	if !limitNameRE.MatchString(fl.Name) {
		c.addf(at, "name: %q must match [A-Za-z0-9_.-]{1,64}", fl.Name)
	}
	checkMatch(c, at, l)
	if l.Kind == KindConcurrency {
		l.Burst = 0 // refused if written; Params is the permit bound
		buildConcurrency(c, at, fl, l)
		return l
	}
	buildRateKind(c, at, fl, l)
	buildLease(c, at, fl, l)
	if buildEnvoy(c, at, fl, l) { // an Envoy "unlimited" limit has no rate
		l.Rate, l.Params = rateAndBurst(c, at, "rate", "burst", fl.Rate, fl.Burst)
	}
	switch {
	case l.OnFailure == FailLocal && fl.FallbackRate == "" && fl.FallbackBurst != 0:
		c.addf(at, "fallback_burst: needs fallback_rate (without both, the fallback is the node's share of the limit)")
	case l.OnFailure == FailLocal && fl.FallbackRate == "":
		l.SharedFallback = true
	case l.OnFailure == FailLocal:
		_, l.Fallback = rateAndBurst(c, at, "fallback_rate", "fallback_burst", fl.FallbackRate, fl.FallbackBurst)
	case fl.FallbackRate != "" || fl.FallbackBurst != 0:
		c.addf(at, "fallback_rate and fallback_burst: only allowed when on_failure is local, not %s", l.OnFailure)
	}
	checkGlobalOpen(c, at, l)
	return l
}

func checkMatch(c *checker, at string, l *Limit) {
	if len(l.Match) == 0 {
		c.addf(at, "match: must list at least one descriptor")
		return
	}
	if len(l.Match) > maxMatch {
		c.addf(at, "match: more than %d descriptors", maxMatch)
	}
	for i, name := range l.Match {
		switch {
		case name == "":
			c.addf(at, "match[%d]: descriptor name is empty", i)
		case len(name) > maxDescriptorBytes:
			c.addf(at, "match[%d]: descriptor name is longer than %d bytes", i, maxDescriptorBytes)
		case slices.Index(l.Match, name) < i:
			c.addf(at, "match[%d]: %q is listed twice", i, name)
		}
	}
	if l.Group == "" {
		l.Group = l.Match[0]
	}
	l.groupPos = slices.Index(l.Match, l.Group)
	if l.groupPos < 0 {
		c.addf(at, "group: %q is not in match", l.Group)
		l.groupPos = 0
	}
}

// rateAndBurst parses a rate and checks a burst, reporting problems under the
// given field names, and returns the rate and their GCRA limit.
func rateAndBurst(c *checker, at, rateField, burstField, rs string, burst int64) (Rate, gcra.Limit) {
	var r Rate
	ok := true
	if rs == "" {
		c.addf(at, "%s: required", rateField)
		ok = false
	} else if parsed, msg := parseRate(rs); msg != "" {
		c.addf(at, "%s: %s", rateField, msg)
		ok = false
	} else {
		r = parsed
	}
	if burst < 1 {
		c.addf(at, "%s: must be at least 1, got %d", burstField, burst)
		ok = false
	}
	if !ok {
		return r, gcra.Limit{}
	}
	l, err := r.Limit(burst)
	if err == nil {
		err = CheckParams(l)
	}
	if err != nil {
		c.addf(at, "%s %s with %s %d: %v", rateField, r, burstField, burst, err)
	}
	return r, l
}

// indexDescriptors numbers the descriptor names the limits use.
func indexDescriptors(p *Policy) {
	p.index = make(map[string]int)
	for _, l := range p.Limits {
		for _, name := range l.Match {
			p.index[name] = 0
		}
	}
	p.names = make([]string, 0, len(p.index))
	for name := range p.index {
		p.names = append(p.names, name)
	}
	sort.Strings(p.names)
	for i, name := range p.names {
		p.index[name] = i
	}
	for _, l := range p.Limits {
		l.match = make([]int, len(l.Match))
		for j, name := range l.Match {
			l.match[j] = p.index[name]
		}
	}
	if i, ok := p.index[p.TenantDescriptor]; ok {
		p.tenantIdx = i
	}
}
