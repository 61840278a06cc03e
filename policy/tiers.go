package policy

import (
	"maps"
	"slices"
)

// buildProfiles resolves tiers, the default tier and tenants into one
// profile (effective numbers per limit) each, so Resolve only looks one up.
// Tenants without overrides share their tier's profile.
func buildProfiles(c *checker, p *Policy, fp *filePolicy) {
	own := make([]numbers, len(p.Limits))
	for i, l := range p.Limits {
		own[i] = numbers{rate: l.Rate, burst: l.Burst, shadow: l.Shadow, params: l.Params}
	}
	tierNums := make(map[string][]numbers, len(fp.Tiers))
	p.tiers = make(map[string]profile, len(fp.Tiers))
	for _, tier := range slices.Sorted(maps.Keys(fp.Tiers)) {
		at := "tiers." + tier
		if tier == "" {
			c.addf("tiers", "a tier name is empty")
		}
		nums := applyAdjusts(c, p, at, own, fp.Tiers[tier])
		tierNums[tier] = nums
		p.tiers[tier] = toProfile(nums)
	}
	defaultNums := own
	p.base = toProfile(own)
	if t := fp.DefaultTier; t != "" {
		if nums, ok := tierNums[t]; ok {
			p.base, defaultNums = p.tiers[t], nums
		} else {
			c.addf("default_tier", "tier %q is not defined", t)
		}
	}
	p.tenants = make(map[string]profile, len(fp.Tenants))
	for _, name := range slices.Sorted(maps.Keys(fp.Tenants)) {
		p.tenants[name] = tenantProfile(c, p, name, fp.Tenants[name], tierNums, defaultNums)
	}
	if len(fp.Tenants) > 0 && p.tenantIdx < 0 {
		c.addf("tenant_descriptor", "%q is in no limit's match, so no tenant can be recognised", p.TenantDescriptor)
	}
}

func tenantProfile(c *checker, p *Policy, name string, t fileTenant, tierNums map[string][]numbers, defaultNums []numbers) profile {
	at := "tenants." + name
	switch {
	case name == "":
		c.addf("tenants", "a tenant name is empty")
	case len(name) > maxDescriptorBytes:
		c.addf(at, "tenant name is longer than %d bytes", maxDescriptorBytes)
	}
	from, prof := defaultNums, p.base
	if t.Tier != "" {
		if nums, ok := tierNums[t.Tier]; ok {
			from, prof = nums, p.tiers[t.Tier]
		} else {
			c.addf(at, "tier: tier %q is not defined", t.Tier)
		}
	}
	if len(t.Overrides) == 0 {
		return prof
	}
	return toProfile(applyAdjusts(c, p, at+".overrides", from, t.Overrides))
}

// applyAdjusts returns from with adj applied. from is not modified.
func applyAdjusts(c *checker, p *Policy, at string, from []numbers, adj map[string]fileAdjust) []numbers {
	nums := slices.Clone(from)
	for _, name := range slices.Sorted(maps.Keys(adj)) {
		path := at + "." + name
		l := p.byName[name]
		if l == nil || name == "" {
			c.addf(path, "no limit is named %q", name)
			continue
		}
		i := slices.Index(p.Limits, l)
		switch {
		case l.Kind == KindConcurrency:
			nums[i] = applyPermitAdjust(c, path, nums[i], adj[name])
		case !refuseMaxInFlight(c, path, adj[name]):
			nums[i] = applyAdjust(c, path, nums[i], adj[name])
		}
	}
	return nums
}

func applyAdjust(c *checker, at string, n numbers, a fileAdjust) numbers {
	if a.Shadow != nil {
		n.shadow = *a.Shadow
	}
	r, b := n.rate, n.burst
	if a.Rate != nil {
		parsed, msg := parseRate(*a.Rate)
		if msg != "" {
			c.addf(at, "rate: %s", msg)
			return n
		}
		r = parsed
	}
	if a.Burst != nil {
		if *a.Burst < 1 {
			c.addf(at, "burst: must be at least 1, got %d", *a.Burst)
			return n
		}
		b = *a.Burst
	}
	if r.N <= 0 || b < 1 || (a.Rate == nil && a.Burst == nil) {
		return n // nothing changes, or the limit itself is bad (reported there)
	}
	params, err := r.Limit(b)
	if err != nil {
		c.addf(at, "rate %s with burst %d: %v", r, b, err)
		return n
	}
	n.rate, n.burst, n.params = r, b, params
	return n
}

func toProfile(nums []numbers) profile {
	prof := make(profile, len(nums))
	for i, n := range nums {
		prof[i] = effective{params: n.params, shadow: n.shadow}
	}
	return prof
}
