package policy

import (
	"fmt"
	"slices"

	"github.com/weirhq/weir/region"
)

// RegionWarnings checks every scope: global limit of p (its own numbers
// and every tier's) against the region settings cfg a node shares them
// with (the unit rule of region.Config.Limit). It returns an error naming
// the first limit that can admit nothing under cfg, and a warning for
// every limit that admits only in some regions at a time: a burst below
// the number of regions gives no region's floor a unit, so a region cut off
// from the key's home, or during a home's start-up, admits nothing. It
// changes nothing.
func (p *Policy) RegionWarnings(cfg region.Config) (warnings []string, err error) {
	n := len(cfg.Regions)
	for _, l := range p.Limits {
		if l.Scope != ScopeGlobal {
			continue
		}
		for _, b := range p.globalBursts(l) {
			strict := l.Consistency == ConsistencyStrict
			lim := l.Params
			lim.Burst = b.burst
			some, floors := cfg.Admits(lim, strict)
			switch {
			case !some && strict:
				return nil, fmt.Errorf("%w: limit %q: a strict global limit is split into fixed equal parts over %d regions, and burst %d%s gives each part less than one unit, so it admits nothing; raise burst to at least %d or use consistency: fast",
					ErrInvalid, l.Name, n, b.burst, b.where, n)
			case !some:
				return nil, fmt.Errorf("%w: limit %q: burst %d%s over %d regions with a region floor of %.4g leaves no region a whole unit, so it admits nothing; lower --region-floor or raise burst",
					ErrInvalid, l.Name, b.burst, b.where, n, cfg.Floor.Fraction())
			case !floors:
				warnings = append(warnings, fmt.Sprintf("limit %q: burst %d%s is below the %d regions: at most %d of them admit at a time (the busiest), and a region cut off from the key's home admits nothing; raise burst to at least %d",
					l.Name, b.burst, b.where, n, b.burst, n))
			}
		}
	}
	return warnings, nil
}

type namedBurst struct {
	burst int64
	where string // "" for the limit's own, " (tier x)" for a tier's
}

// globalBursts returns l's own burst and every tier's that differs, tiers
// by name.
func (p *Policy) globalBursts(l *Limit) []namedBurst {
	out := []namedBurst{{burst: l.Params.Burst}}
	names := make([]string, 0, len(p.tiers))
	for name := range p.tiers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if params, _, ok := p.Tier(name, l.Name); ok && params.Burst != l.Params.Burst {
			out = append(out, namedBurst{burst: params.Burst, where: fmt.Sprintf(" (tier %s)", name)})
		}
	}
	return out
}
