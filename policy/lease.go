package policy

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/weirhq/weir/lease"
)

// fileLease is a limit's `lease: {max: N, ttl: 250ms}`. line is where it
// starts in the file, for messages that point at it.
type fileLease struct {
	Max  int64  `yaml:"max"`
	TTL  string `yaml:"ttl"`
	line int
}

// UnmarshalYAML decodes the mapping and remembers its line. Node.Decode
// does not inherit the decoder's KnownFields, so unknown fields are
// refused here.
func (f *fileLease) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i].Value; k != "max" && k != "ttl" {
				return fmt.Errorf("line %d: field %s not found in lease (want max and ttl)", n.Content[i].Line, k)
			}
		}
	}
	type plain fileLease // no UnmarshalYAML: decodes field by field
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	*f = fileLease(p)
	f.line = n.Line
	return nil
}

// buildLease checks a limit's lease settings and sets l.Lease. The old
// boolean `leasable` is refused with a message saying what replaced it:
// it never had an effect, and mapping it to made-up terms would turn
// leasing on with numbers nobody chose.
func buildLease(c *checker, at string, fl *fileLimit, l *Limit) {
	if fl.Leasable != nil {
		c.addf(at, "leasable: replaced by lease: {max: N, ttl: 250ms} (units per grant, lease lifetime); remove leasable")
	}
	if fl.Lease == nil {
		return
	}
	where := fmt.Sprintf("%s (%s:%d)", at, c.source, fl.Lease.line)
	if l.Consistency == ConsistencyStrict {
		c.addf(where, "lease: only fast limits may be leased; this limit is strict (every decision is made by Redis)")
		return
	}
	if l.Scope == ScopeGlobal {
		// A global key is decided at its region's share, which the owner's
		// lease ledger does not know: a grant sized from the whole limit
		// could hand out more than the region holds.
		c.addf(where, "lease: a scope: global limit cannot be leased yet (its region's share changes under the lease); remove lease or use scope: region")
		return
	}
	ttl, err := time.ParseDuration(fl.Lease.TTL)
	if err != nil || fl.Lease.TTL == "" {
		c.addf(where, "lease.ttl: %q is not a duration such as 250ms", fl.Lease.TTL)
		return
	}
	t := lease.Terms{Max: fl.Lease.Max, TTL: ttl}
	switch {
	case t.Max < 1 || t.Max > maxLeaseUnits:
		c.addf(where, "lease.max: %d must be in [1, %d]", t.Max, maxLeaseUnits)
	case ttl < minLeaseTTL || ttl > maxLeaseTTL:
		c.addf(where, "lease.ttl: %s must be in [%s, %s]", ttl, minLeaseTTL, maxLeaseTTL)
	default:
		l.Lease = &t
	}
}

// Bounds of a limit's lease terms. A TTL is the longest a dead peer's units
// stay stranded; shorter than a few milliseconds it costs a refresh per
// handful of requests.
const (
	maxLeaseUnits = 1_000_000
	minLeaseTTL   = 10 * time.Millisecond
	maxLeaseTTL   = 10 * time.Second
)

// LeaseWarnings returns one line per leasable limit, and per distinct set of
// numbers its tiers and tenants give it, that lease.CheckLeasable says is
// too small to lease in a cluster of nodes nodes. Such a limit is not
// rejected: it is decided at its owner, without leases. Safe for
// concurrent use.
func (p *Policy) LeaseWarnings(nodes int) []string {
	var out []string
	for i, l := range p.Limits {
		if l.Lease == nil {
			continue
		}
		for _, params := range p.keys.paramSets[i] {
			if err := lease.CheckLeasable(params, *l.Lease, nodes); err != nil {
				out = append(out, fmt.Sprintf("limit %q (burst %d): not leased with %d nodes, decided at its owner: %v", l.Name, params.Burst, nodes, err))
			}
		}
	}
	return out
}

// Leasable reports whether m may be decided from leases in a cluster of
// nodes nodes: its limit has lease terms, is fast and enforced, and the
// numbers the tenant gets are large enough (lease.CheckLeasable).
func (m *Match) Leasable(nodes int) bool {
	l := m.Limit
	return l.Lease != nil && !m.Shadow && l.Consistency == ConsistencyFast &&
		lease.CheckLeasable(m.Params, *l.Lease, nodes) == nil
}

// Leases reports whether any limit of this policy has lease terms: when
// none has, no key needs LimitOfKey to find out. Safe for concurrent use.
func (p *Policy) Leases() bool { return p.leases }
