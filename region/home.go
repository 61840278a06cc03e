package region

import (
	"fmt"
	"math"
	"slices"
)

// Home is the ledger of the global keys whose home is this region: the
// shares it granted every region, and the rule that keeps their sum within
// the whole limit.
//
// Every region holds Config.Floor of every key without asking. Above that,
// a region holds what the home granted it, from the moment the home grants
// (on the home's clock) until the grant's TTL plus Grace has passed or the
// region acknowledges a newer grant. A grant is only ever made from the
// capacity no other region holds, so a decrease takes effect (frees
// capacity) before the increase it makes room for, and
//
//	Σ over regions of max(Floor, granted and not yet released) ≤ Whole
//
// at every instant, messages in flight included: see Reserved.
//
// A Home does no I/O and reads no clock: times are integer nanoseconds on
// the home's clock, passed in. It is not safe for concurrent use.
type Home struct {
	cfg   Config
	name  string
	quiet int64 // no grant above the floor before this (restart)
	// moved: no grant above the floor before this for a key first seen
	// after the last Moved (it may have been granted by another process).
	moved  int64
	keys   map[string]*ledger
	bursts func(key string) int64
}

type ledger struct {
	quiet   int64 // no grant above the floor before this (adopted key)
	regions map[string]*account
}

// account is one region's standing on one key.
type account struct {
	demand    float64
	heard     int64 // when demand was reported
	reporters map[string]*book
}

// book is one reporting process's grants on one key, oldest first.
type book struct {
	ack    uint64 // newest grant the process has applied
	seen   uint64 // newest report from the process
	grants []held
}

type held struct {
	seq   uint64
	share Share
	until int64 // home clock: granted + TTL + Grace
}

// NewHome returns the home ledger of region name, started at now. Having
// no record of what it granted before it started, it grants nothing above
// the floors until TTL + Grace after now, when every grant a previous
// incarnation made has expired. It returns an error if cfg is invalid or
// name is not one of its regions.
func NewHome(cfg Config, name string, now int64) (*Home, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.hasRegion(name) {
		return nil, fmt.Errorf("%w: region %q is not in %v", ErrInvalidConfig, name, cfg.Regions)
	}
	cfg.Regions = slices.Clone(cfg.Regions)
	return &Home{cfg: cfg, name: name, quiet: now + cfg.ttl() + cfg.grace(), keys: make(map[string]*ledger)}, nil
}

// Adopt tells the home that it has just become responsible for key (its
// owner moved to this process): grants the previous process made may still
// be in use, so it grants nothing above the floors for key until TTL +
// Grace after now.
func (h *Home) Adopt(key string, now int64) {
	h.ledger(key).quiet = now + h.cfg.ttl() + h.cfg.grace()
}

// Moved tells the home that ownership of keys changed at now (a ring
// change in its region): it forgets every key for which keep(key) is false
// (no longer this process's), and a key it does not remember may have been
// granted by the process that held it before, so such a key, once
// reported, is granted nothing above the floors until TTL + Grace after
// now, as after Adopt. Keys it keeps are unaffected.
func (h *Home) Moved(now int64, keep func(key string) bool) {
	for k := range h.keys {
		if !keep(k) {
			delete(h.keys, k)
		}
	}
	h.moved = now + h.cfg.ttl() + h.cfg.grace()
}

// SetBursts tells the home the global burst of each key (0 when unknown),
// for the keys whose floors hold no unit of it (burst below the number of
// regions, Config.Limit): their units go to at most burst regions, the
// busiest, instead of being spread thinner than a unit. Without it (or for
// a burst of 0) the targets are the plain ones (Targets). It changes
// efficiency only: Σ shares ≤ Whole holds either way.
func (h *Home) SetBursts(bursts func(key string) int64) { h.bursts = bursts }

func (h *Home) ledger(key string) *ledger {
	l := h.keys[key]
	if l == nil {
		l = &ledger{quiet: h.moved, regions: make(map[string]*account)}
		h.keys[key] = l
	}
	return l
}

// Handle answers a report at now: it records the region's demand and
// acknowledgements, and grants it a share of every key in the report, each
// valid for TTL. It returns an error wrapping ErrInvalidReport, and changes
// nothing, if the report is not addressed to this home, comes from an
// unknown region, names a key twice or a key homed elsewhere, or carries a
// demand that is negative or not finite.
func (h *Home) Handle(now int64, r Report) (Reply, error) {
	if err := h.check(r); err != nil {
		return Reply{}, err
	}
	rep := Reply{Home: h.name, To: r.From, Reporter: r.Reporter, Seq: r.Seq, Grants: make([]Grant, 0, len(r.Items))}
	for _, it := range r.Items {
		l := h.ledger(it.Key)
		acc := l.regions[r.From]
		if acc == nil {
			acc = &account{reporters: make(map[string]*book)}
			l.regions[r.From] = acc
		}
		b := acc.reporters[r.Reporter]
		if b == nil {
			b = &book{}
			acc.reporters[r.Reporter] = b
		}
		if r.Seq >= b.seen { // a report overtaken by a newer one is old news
			acc.demand, acc.heard, b.seen = it.Demand, now, r.Seq
		}
		b.ack = max(b.ack, it.Ack)
		b.prune(now)
		s := h.grant(now, it.Key, l, r.From, b)
		b.grants = append(b.grants, held{seq: r.Seq, share: s, until: now + h.cfg.ttl() + h.cfg.grace()})
		rep.Grants = append(rep.Grants, Grant{Key: it.Key, Share: s, TTL: h.cfg.ttl()})
	}
	return rep, nil
}

// Check returns the error Handle would return for r, without changing
// anything. It reads only the home's configuration, so unlike the other
// methods it is safe to call concurrently with them.
func (h *Home) Check(r Report) error { return h.check(r) }

func (h *Home) check(r Report) error {
	switch {
	case r.Home != h.name:
		return fmt.Errorf("%w: addressed to %q, this is %q", ErrInvalidReport, r.Home, h.name)
	case !h.cfg.hasRegion(r.From):
		return fmt.Errorf("%w: unknown region %q", ErrInvalidReport, r.From)
	case r.Reporter == "":
		return fmt.Errorf("%w: no reporter", ErrInvalidReport)
	}
	seen := make(map[string]bool, len(r.Items))
	for _, it := range r.Items {
		if seen[it.Key] {
			return fmt.Errorf("%w: key %q twice", ErrInvalidReport, it.Key)
		}
		seen[it.Key] = true
		if math.IsNaN(it.Demand) || math.IsInf(it.Demand, 0) || it.Demand < 0 {
			return fmt.Errorf("%w: key %q: demand %v", ErrInvalidReport, it.Key, it.Demand)
		}
		if home, _ := HomeOf(it.Key, h.cfg.Regions); home != h.name {
			return fmt.Errorf("%w: key %q is homed in %q", ErrInvalidReport, it.Key, home)
		}
	}
	return nil
}

// grant returns the share to grant region from (reporting process b) on a
// key: its damped target, at least the floor, and never more than the
// capacity no one else holds.
func (h *Home) grant(now int64, key string, l *ledger, from string, b *book) Share {
	floor := h.cfg.Floor
	demand := make([]float64, len(h.cfg.Regions))
	me := 0
	for i, name := range h.cfg.Regions {
		if name == from {
			me = i
		}
		if a := l.regions[name]; a != nil && now-a.heard <= h.cfg.ttl() {
			demand[i] = a.demand // a region silent for a TTL wants nothing
		}
	}
	targets := Targets(demand, floor)
	if h.bursts != nil {
		if burst := h.bursts(key); burst > 0 {
			targets = h.cfg.quantize(targets, demand, h.holdUnits(now, l, burst), burst)
		}
	}
	cur := floor
	if g, ok := b.newest(now); ok {
		cur = g.share
	}
	next := max(floor, damp(cur, targets[me], h.cfg.Damping))
	if now < max(h.quiet, l.quiet) {
		next = floor
	}
	return min(next, h.free(now, l, from, b))
}

// holdUnits reports, per region, whether it holds at least a unit of a
// burst whose floors hold none (Config.quantize).
func (h *Home) holdUnits(now int64, l *ledger, burst int64) []bool {
	out := make([]bool, len(h.cfg.Regions))
	for i, name := range h.cfg.Regions {
		out[i] = l.regions[name].reserved(now, h.cfg.Floor) >= h.cfg.Floor+h.cfg.unitStep(burst)
	}
	return out
}

// free is the most that may be granted to reporter b of region from: Whole
// less what every other region holds (at least its floor) and what other
// processes of region from hold.
func (h *Home) free(now int64, l *ledger, from string, b *book) Share {
	free := Whole
	for _, name := range h.cfg.Regions {
		a := l.regions[name]
		switch {
		case name != from:
			free -= a.reserved(now, h.cfg.Floor)
		case a != nil:
			for _, o := range a.reporters {
				if o != b {
					free -= o.holds(now)
				}
			}
		}
	}
	return max(0, free)
}

// Reserved returns the sum over regions of the share of key each may be
// using at now by the home's reckoning: its floor, or more while a grant
// is unreleased. It never exceeds Whole.
func (h *Home) Reserved(key string, now int64) Share {
	var sum Share
	l := h.keys[key]
	for _, name := range h.cfg.Regions {
		var a *account
		if l != nil {
			a = l.regions[name]
		}
		sum += a.reserved(now, h.cfg.Floor)
	}
	return sum
}

// Sweep forgets grants that have expired at now and keys with nothing
// left to remember. Call it every few TTLs; it changes no decision.
func (h *Home) Sweep(now int64) {
	for key, l := range h.keys {
		for name, a := range l.regions {
			for rp, b := range a.reporters {
				b.prune(now)
				if len(b.grants) == 0 && now-a.heard > h.cfg.ttl() {
					delete(a.reporters, rp)
				}
			}
			if len(a.reporters) == 0 {
				delete(l.regions, name)
			}
		}
		if len(l.regions) == 0 && l.quiet <= now {
			delete(h.keys, key)
		}
	}
}

// Keys returns how many keys the home remembers.
func (h *Home) Keys() int { return len(h.keys) }

// reserved is what region a may be using: its floor, or the sum of what
// its processes hold if more. A nil account holds the floor.
func (a *account) reserved(now int64, floor Share) Share {
	if a == nil {
		return floor
	}
	var sum Share
	for _, b := range a.reporters {
		sum += b.holds(now)
	}
	return max(floor, sum)
}

// holds is the largest unreleased grant of b: the process uses one grant
// at a time, but the home cannot tell which until it acknowledges.
func (b *book) holds(now int64) Share {
	var m Share
	for _, g := range b.grants {
		if g.until > now && g.seq >= b.ack {
			m = max(m, g.share)
		}
	}
	return m
}

// newest is b's newest live grant.
func (b *book) newest(now int64) (held, bool) {
	for i := len(b.grants) - 1; i >= 0; i-- {
		if g := b.grants[i]; g.until > now && g.seq >= b.ack {
			return g, true
		}
	}
	return held{}, false
}

// prune drops the grants released at now: expired, or older than the
// newest acknowledged one.
func (b *book) prune(now int64) {
	keep := b.grants[:0]
	for _, g := range b.grants {
		if g.until > now && g.seq >= b.ack {
			keep = append(keep, g)
		}
	}
	b.grants = keep
}
