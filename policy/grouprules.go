package policy

import "slices"

// GroupRule says where a request's group comes from, without anything else
// of the limit it was taken from: a request with a non-empty value for every
// descriptor in Match matches such a limit, and its group is the value of
// descriptor Group.
type GroupRule struct {
	Match []string
	Group string
}

// GroupRules returns the group rules of the limits Resolve considers (not
// the Envoy-only ones), in policy order, without repeats. A request's first
// matching rule gives the GroupValue of every Match that Resolve returns for
// it (limits of one request that disagree are refused by the limiter), and
// a request matching no rule matches no limit. Clients use the rules to
// route a request to its group's owner (see api/weir/v1 Topology); they say
// nothing about rates, tiers or tenants. The caller owns the result.
func (p *Policy) GroupRules() []GroupRule {
	var out []GroupRule
	for _, l := range p.Limits {
		if l.Envoy.Domain != "" {
			continue
		}
		r := GroupRule{Match: slices.Clone(l.Match), Group: l.Group}
		if !slices.ContainsFunc(out, func(o GroupRule) bool {
			return o.Group == r.Group && slices.Equal(o.Match, r.Match)
		}) {
			out = append(out, r)
		}
	}
	return out
}
