package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/weirhq/weir/limitkey"
)

// EnvoyLimit is a limit's Envoy rate limit service (RLS) settings. A limit
// with a Domain answers Envoy's ShouldRateLimit calls for that domain (see
// ResolveEnvoy) and is left out of Resolve, weir's own API: Envoy's
// descriptor matching is a tree walk that differs from weir's "all names
// present", so one limit answers one of the two.
//
// Its Match lists an Envoy descriptor's entry keys in order; Values pins
// some of them to one value, as `value:` does in an envoyproxy/ratelimit
// config.
type EnvoyLimit struct {
	// Domain is the RLS domain; "" for a weir-only limit.
	Domain string
	// Values maps some Match names to the only value they match. A key
	// without an entry matches any value, each value with its own quota.
	Values map[string]string
	// Unlimited limits match and admit everything, with no rate or burst.
	Unlimited bool
	// Replaces names limits of the same domain that this one switches off
	// when both apply to one RLS request.
	Replaces []string
}

// fileEnvoy is EnvoyLimit as written in a limit's YAML.
type fileEnvoy struct {
	Domain    string            `yaml:"domain"`
	Values    map[string]string `yaml:"values"`
	Unlimited bool              `yaml:"unlimited"`
	Replaces  []string          `yaml:"replaces"`
}

// EnvoyEntry is one entry of an Envoy rate limit descriptor.
type EnvoyEntry struct{ Key, Value string }

// buildEnvoy checks fl's Envoy settings and copies them into l. It returns
// whether the limit needs a rate and burst (false for an unlimited one).
func buildEnvoy(c *checker, at string, fl *fileLimit, l *Limit) bool {
	fe := fl.fileEnvoy
	l.Envoy = EnvoyLimit{Domain: fe.Domain, Values: maps.Clone(fe.Values), Unlimited: fe.Unlimited, Replaces: slices.Clone(fe.Replaces)}
	if len(fe.Domain) > maxDescriptorBytes {
		c.addf(at, "domain: longer than %d bytes", maxDescriptorBytes)
	}
	if fe.Domain == "" && (len(fe.Values) > 0 || fe.Unlimited || len(fe.Replaces) > 0) {
		c.addf(at, "values, unlimited and replaces: only allowed on a limit with a domain")
	}
	for _, k := range slices.Sorted(maps.Keys(fe.Values)) {
		v := fe.Values[k]
		switch {
		case !slices.Contains(l.Match, k):
			c.addf(at, "values.%s: %q is not in match", k, k)
		case v == "" || len(v) > maxDescriptorBytes:
			c.addf(at, "values.%s: must be 1 to %d bytes", k, maxDescriptorBytes)
		}
	}
	if !fe.Unlimited {
		return true
	}
	if fl.Rate != "" || fl.Burst != 0 || fl.Shadow || fl.OnFailure != "" || fl.FallbackRate != "" || fl.Leasable != nil || fl.Lease != nil {
		c.addf(at, "unlimited: a limit that admits everything takes no rate, burst, shadow, on_failure, fallback or lease")
	}
	return false
}

// indexDomains groups the Envoy limits by domain and checks what needs the
// whole policy: replaced limits exist in the same domain, and no two limits
// sit at the same place of a domain's descriptor tree.
func indexDomains(c *checker, p *Policy) {
	p.domains = make(map[string][]*Limit)
	seen := make(map[string]string) // domain + tree place -> limit name
	for _, l := range p.Limits {
		d := l.Envoy.Domain
		if d == "" {
			continue
		}
		p.domains[d] = append(p.domains[d], l)
		place := d + "\x00" + treePlace(l)
		if prev, dup := seen[place]; dup {
			c.addf("limits "+fmt.Sprintf("%q", l.Name), "domain %q: same descriptor keys and values as limit %q", d, prev)
		}
		seen[place] = l.Name
	}
	for _, l := range p.Limits {
		for _, r := range l.Envoy.Replaces {
			if t := p.byName[r]; t == nil || t.Envoy.Domain != l.Envoy.Domain {
				c.addf(fmt.Sprintf("limits %q", l.Name), "replaces: no limit %q in domain %q", r, l.Envoy.Domain)
			}
		}
	}
}

// treePlace names l's node in its domain's descriptor tree.
func treePlace(l *Limit) string {
	var b strings.Builder
	for _, k := range l.Match {
		b.WriteString(k)
		if v, ok := l.Envoy.Values[k]; ok {
			b.WriteString("=" + v)
		}
		b.WriteByte(0)
	}
	return b.String()
}

// Domains returns the Envoy RLS domains some limit answers, sorted.
func (p *Policy) Domains() []string { return slices.Sorted(maps.Keys(p.domains)) }

// HasDomain reports whether some limit answers the Envoy RLS domain.
func (p *Policy) HasDomain(domain string) bool { return len(p.domains[domain]) > 0 }

// ResolveEnvoy finds the limit that answers one Envoy rate limit descriptor
// of domain, as envoyproxy/ratelimit walks its configuration tree: level by
// level, an entry goes to the node pinned to its value if there is one,
// otherwise to the node for its key with any value, and never back. The
// limit at the node the last entry reaches answers; if the walk stops early
// or ends at a node without a limit, nothing does (ok is false). An
// unlimited limit is returned with zero Params. An entry with an empty
// value, or a key listed twice, matches nothing.
func (p *Policy) ResolveEnvoy(domain string, entries []EnvoyEntry) (m Match, ok bool) {
	cands := p.domains[domain]
	if len(entries) == 0 || len(cands) == 0 {
		return Match{}, false
	}
	// The candidates of entry i are built in bufs[i%2] while cands, from
	// entry i-1, may still sit in the other: no allocation for the usual
	// few candidates.
	var bufs [2][2][8]*Limit
	for i, e := range entries {
		if e.Value == "" {
			return Match{}, false
		}
		pinned, wild := bufs[i%2][0][:0], bufs[i%2][1][:0]
		for _, l := range cands {
			if len(l.Match) <= i || l.Match[i] != e.Key {
				continue
			}
			if v, has := l.Envoy.Values[e.Key]; !has {
				wild = append(wild, l)
			} else if v == e.Value {
				pinned = append(pinned, l)
			}
		}
		if len(pinned) == 0 {
			pinned = wild
		}
		if len(pinned) == 0 {
			return Match{}, false
		}
		cands = pinned
	}
	for _, l := range cands {
		if len(l.Match) == len(entries) {
			return p.envoyMatch(l, entries)
		}
	}
	return Match{}, false
}

// envoyMatch builds l's Match for entries, which follow l.Match key by key.
func (p *Policy) envoyMatch(l *Limit, entries []EnvoyEntry) (Match, bool) {
	var buf [32]string
	vals := buf[:]
	if len(p.names) > len(buf) {
		vals = make([]string, len(p.names))
	}
	for _, e := range entries {
		vals[p.index[e.Key]] = e.Value
	}
	var kbuf [32]string
	values, ok := keyValues(l, vals, kbuf[:0])
	if !ok {
		return Match{}, false
	}
	group := values[l.groupPos]
	e := p.tenantProfile(vals)[slices.Index(p.Limits, l)]
	return Match{Limit: l, Key: limitkey.Key(group, l.Name, values...), GroupValue: group, Params: e.params, Shadow: e.shadow}, true
}
