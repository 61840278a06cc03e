package policy

import (
	"fmt"
	"time"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/permit"
)

// Kind says what a limit counts.
type Kind string

const (
	// KindRate limits admit units at a rate with a burst (GCRA). The
	// default.
	KindRate Kind = "rate"
	// KindConcurrency limits bound the permits held at once: an admitted
	// request holds its cost in slots until it releases its permit or the
	// permit's ttl runs out (package permit).
	KindConcurrency Kind = "concurrency"
)

// The bounds and defaults of the concurrency and reservation settings.
const (
	// DefaultPermitTTL is a permit's life on a concurrency limit without
	// ttl: a holder that neither releases nor renews frees its slots after
	// this long.
	DefaultPermitTTL = 30 * time.Second
	// MinPermitTTL and MaxPermitTTL bound a concurrency limit's ttl
	// (MaxPermitTTL is permit.MaxTTL).
	MinPermitTTL = time.Second
	MaxPermitTTL = time.Duration(permit.MaxTTL)
	// MinReserveTTL and MaxReserveTTL bound a rate limit's reserve_ttl;
	// without one a limit keeps decide.DefaultReserveTTL.
	MinReserveTTL = time.Second
	MaxReserveTTL = 24 * time.Hour
)

// fileConcurrency is a limit's kind and its concurrency and reservation
// settings as written in YAML (inlined in fileLimit).
type fileConcurrency struct {
	Kind        string `yaml:"kind"`
	MaxInFlight *int64 `yaml:"max_in_flight"`
	TTL         string `yaml:"ttl"`
	ReserveTTL  string `yaml:"reserve_ttl"`
}

// CheckPermitParams reports whether l, read as a concurrency key's permit
// bound (decide.PermitLimit: Burst is max_in_flight, Interval the permit
// ttl in nanoseconds), lies within the ranges a policy accepts: a
// max_in_flight in [1, permit.MaxInFlight] and a ttl in [MinPermitTTL,
// MaxPermitTTL]. Forwarded concurrency keys must be checked with it, not
// CheckParams: a permit bound is no rate, and 10,000 permits of 24 hours
// span far more than MaxSpan. The error wraps ErrInvalid. It changes
// nothing.
func CheckPermitParams(l gcra.Limit) error {
	n, ttl := decide.PermitLimit(l)
	if n < 1 || n > permit.MaxInFlight {
		return &invalidError{msg: fmt.Sprintf("policy: max_in_flight %d outside [1, %d]", n, permit.MaxInFlight)}
	}
	if ttl < int64(MinPermitTTL) || ttl > int64(MaxPermitTTL) {
		return &invalidError{msg: fmt.Sprintf("policy: permit ttl %dns outside [%d, %d]", ttl, int64(MinPermitTTL), int64(MaxPermitTTL))}
	}
	return nil
}

// buildConcurrency checks a kind: concurrency limit's settings and sets its
// MaxInFlight, TTL and Params. Settings inherited from the policy's
// defaults never refuse it: a concurrency limit is always fast and
// regional, and a default on_failure of local makes it closed. Only what
// the limit itself writes is refused.
func buildConcurrency(c *checker, at string, fl *fileLimit, l *Limit) {
	refuseRateSettings(c, at, fl)
	switch {
	case fl.Consistency == "":
		l.Consistency = ConsistencyFast
	case l.Consistency == ConsistencyStrict:
		c.addf(at, "consistency: a concurrency limit cannot be strict (its permits live in the owner's memory, written through to Redis); remove consistency or write fast")
	}
	switch {
	case fl.Scope == "":
		l.Scope = ScopeRegion
	case l.Scope == ScopeGlobal:
		c.addf(at, "scope: a concurrency limit cannot be scope: global (its permits are counted in one region); remove scope or write region")
	}
	switch {
	case fl.OnFailure == "" && l.OnFailure == FailLocal:
		l.OnFailure = FailClosed
	case fl.OnFailure == string(FailLocal):
		c.addf(at, "on_failure: local cannot be used on a concurrency limit (one node alone cannot count the permits others hold, nor release them); use closed (the default for concurrency limits) or open (admitted without a permit)")
	}
	if fl.Shadow {
		c.addf(at, "shadow: %s", shadowRefusal)
	}
	if fl.ReserveTTL != "" {
		c.addf(at, "reserve_ttl: a concurrency limit takes no reservations (a permit is released, not settled); remove reserve_ttl, or use ttl for a permit's life")
	}
	fe := fl.fileEnvoy
	if fe.Domain != "" || len(fe.Values) > 0 || fe.Unlimited || len(fe.Replaces) > 0 {
		c.addf(at, "domain, values, unlimited and replaces: Envoy cannot release a permit, so a concurrency limit cannot answer Envoy RLS; remove them (gateways acquire and release through weir's API)")
	}
	switch n := fl.MaxInFlight; {
	case n == nil:
		c.addf(at, "max_in_flight: required on a concurrency limit (the most permits held at once, 1 to %d)", permit.MaxInFlight)
	case *n < 1 || *n > permit.MaxInFlight:
		c.addf(at, "max_in_flight: %d must be in [1, %d]", *n, permit.MaxInFlight)
	default:
		l.MaxInFlight = *n
	}
	l.TTL = DefaultPermitTTL
	if fl.TTL != "" {
		l.TTL = durationField(c, at, "ttl", fl.TTL, "30s", MinPermitTTL, MaxPermitTTL)
	}
	if l.MaxInFlight > 0 && l.TTL > 0 {
		l.Params = gcra.Limit{Burst: l.MaxInFlight, Interval: l.TTL.Nanoseconds()}
	}
}

// refuseRateSettings refuses on a concurrency limit what only rate limits
// take.
func refuseRateSettings(c *checker, at string, fl *fileLimit) {
	if fl.Rate != "" || fl.Burst != 0 {
		c.addf(at, "rate and burst: a concurrency limit bounds the permits held at once, not a rate; use max_in_flight (and ttl), or remove kind: concurrency")
	}
	if fl.Lease != nil || fl.Leasable != nil {
		c.addf(at, "lease: a concurrency limit cannot be leased (a permit is held and released at its owner); remove lease")
	}
	if fl.FallbackRate != "" || fl.FallbackBurst != 0 {
		c.addf(at, "fallback_rate and fallback_burst: a concurrency limit has no local fallback (one node alone cannot count the permits others hold); remove them and use on_failure: closed or open")
	}
}

// buildRateKind checks the concurrency and reservation settings of a
// kind: rate limit and sets its ReserveTTL.
func buildRateKind(c *checker, at string, fl *fileLimit, l *Limit) {
	if fl.MaxInFlight != nil {
		c.addf(at, "max_in_flight: only a kind: concurrency limit bounds requests in flight; add kind: concurrency (instead of rate and burst), or remove max_in_flight")
	}
	if fl.TTL != "" {
		c.addf(at, "ttl: only a kind: concurrency limit has a permit ttl; add kind: concurrency, or remove ttl (a lease's ttl goes in lease: {max, ttl})")
	}
	l.ReserveTTL = time.Duration(decide.DefaultReserveTTL)
	switch {
	case fl.ReserveTTL == "":
	case l.Consistency == ConsistencyStrict:
		c.addf(at, "reserve_ttl: a strict limit takes no reservations (Redis decides it and cannot settle one yet); remove reserve_ttl, or make the limit fast")
	case fl.Domain != "":
		c.addf(at, "reserve_ttl: a limit with a domain answers Envoy RLS, which never reserves; remove reserve_ttl, or remove domain to reserve through weir's API")
	default:
		l.ReserveTTL = durationField(c, at, "reserve_ttl", fl.ReserveTTL, "5m", MinReserveTTL, MaxReserveTTL)
	}
}

// durationField parses a duration setting in [lo, hi]; 0 when it is not.
func durationField(c *checker, at, field, v, example string, lo, hi time.Duration) time.Duration {
	d, err := time.ParseDuration(v)
	if err != nil {
		c.addf(at, "%s: %q is not a duration such as %s", field, v, example)
		return 0
	}
	if d < lo || d > hi {
		c.addf(at, "%s: %s must be in [%s, %s]", field, d, lo, hi)
		return 0
	}
	return d
}

// shadowRefusal says why a concurrency limit, or a tier or override of
// one, cannot be shadow.
const shadowRefusal = "a concurrency limit cannot be shadow: a shadow decision would take slots that the caller's permit does not name, held until their ttl; to trial one, enforce it with a generous max_in_flight and watch weir_permits_live"

// applyPermitAdjust is applyAdjust for a concurrency limit: a tier or an
// override may set its max_in_flight, not a rate or burst, and not shadow
// (shadow: false is accepted: it changes nothing).
func applyPermitAdjust(c *checker, at string, n numbers, a fileAdjust) numbers {
	if a.Rate != nil || a.Burst != nil {
		c.addf(at, "rate and burst: the limit is a concurrency limit, which has no rate; set max_in_flight")
		return n
	}
	if a.Shadow != nil && *a.Shadow {
		c.addf(at, "shadow: %s", shadowRefusal)
		return n
	}
	if a.MaxInFlight == nil {
		return n
	}
	if m := *a.MaxInFlight; m < 1 || m > permit.MaxInFlight {
		c.addf(at, "max_in_flight: %d must be in [1, %d]", m, permit.MaxInFlight)
		return n
	}
	if n.params.Interval > 0 { // else the limit itself is bad (reported there)
		n.burst, n.params.Burst = *a.MaxInFlight, *a.MaxInFlight
	}
	return n
}

// refuseMaxInFlight refuses max_in_flight in a tier or override of a rate
// limit; it reports whether it did.
func refuseMaxInFlight(c *checker, at string, a fileAdjust) bool {
	if a.MaxInFlight == nil {
		return false
	}
	c.addf(at, "max_in_flight: the limit is a rate limit, which counts no requests in flight; set rate or burst")
	return true
}

// checkConcurrencyGroups refuses a concurrency limit that shares its group
// descriptor with a strict limit: a request matching both would be decided
// whole by Redis (see checkConsistency), which holds no permits.
func checkConcurrencyGroups(c *checker, p *Policy) {
	for _, a := range p.Limits {
		if a.Kind != KindConcurrency {
			continue
		}
		for _, b := range p.Limits {
			if b.Consistency == ConsistencyStrict && b.Group == a.Group && a.Group != "" {
				c.addf("limits", "%q (kind concurrency) and %q (consistency strict) share group %q: a request matching both would be decided by Redis, which holds no permits; make %q fast, or give them different groups",
					a.Name, b.Name, a.Group, b.Name)
			}
		}
	}
}
