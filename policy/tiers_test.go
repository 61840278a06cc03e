package policy

import (
	"testing"

	"github.com/weirhq/weir/gcra"
)

// TestPolicy_Tenant_tiersAndOverrides checks testdata/full.yaml, whose
// default tier is "free" (per-tenant 10/s burst 10) and whose "pro" tier
// sets per-user to 50/s burst 20 and shadows audit.
func TestPolicy_Tenant_tiersAndOverrides(t *testing.T) {
	p, err := LoadFile("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	own := func(name string) gcra.Limit { return p.Limit(name).Params }
	for _, tc := range []struct {
		tenant, limit string
		want          gcra.Limit
		shadow        bool
	}{
		// No entry: the default tier, which only changes per-tenant.
		{"stranger", "per-user", own("per-user"), false},
		{"stranger", "per-tenant", gcra.Limit{Interval: 100_000_000, Burst: 10}, false},
		// Tier pro: per-user raised, audit shadowed, per-tenant its own (not free's).
		{"acme", "per-user", gcra.Limit{Interval: 20_000_000, Burst: 20}, false},
		{"acme", "per-tenant", own("per-tenant"), false},
		{"acme", "audit", own("audit"), true},
		// Override beats the tier; fields it does not set come from the tier.
		{"bigco", "per-user", gcra.Limit{Interval: 10_000_000, Burst: 50}, false},
		{"bigco", "audit", own("audit"), true},
		// No tier named: the default tier, then the override, field by field.
		{"tiny", "per-user", gcra.Limit{Interval: 200_000_000, Burst: 1}, false},
		{"tiny", "per-tenant", gcra.Limit{Interval: 100_000_000, Burst: 10}, false},
	} {
		got, shadow, ok := p.Tenant(tc.tenant, tc.limit)
		if !ok || got != tc.want || shadow != tc.shadow {
			t.Errorf("Tenant(%q, %q) = %+v shadow=%v ok=%v; want %+v shadow=%v",
				tc.tenant, tc.limit, got, shadow, ok, tc.want, tc.shadow)
		}
	}
	if got, _, ok := p.Tier("pro", "per-user"); !ok || got != (gcra.Limit{Interval: 20_000_000, Burst: 20}) {
		t.Errorf("Tier(pro, per-user) = %+v, %v", got, ok)
	}
	if _, _, ok := p.Tier("gold", "per-user"); ok {
		t.Error("Tier(gold) found")
	}
	if _, _, ok := p.Tenant("acme", "nope"); ok {
		t.Error("Tenant(acme, nope) found")
	}
}

func TestPolicy_Tenant_withoutDefaultTier(t *testing.T) {
	p := mustParse(t, `
tiers:
  quiet: {a: {shadow: true}}
  loud: {a: {shadow: false, rate: 2/s}}
tenants:
  q: {tier: quiet}
  l: {tier: loud}
  o: {tier: quiet, overrides: {a: {shadow: false}}}
limits:
  - {name: a, match: [tenant], rate: 1/s, burst: 4, shadow: true}
`)
	for _, tc := range []struct {
		tenant   string
		interval int64
		shadow   bool
	}{
		{"nobody", 1_000_000_000, true}, // the limit's own numbers
		{"q", 1_000_000_000, true},
		{"l", 500_000_000, false},
		{"o", 1_000_000_000, false},
	} {
		got, shadow, _ := p.Tenant(tc.tenant, "a")
		if got.Interval != tc.interval || got.Burst != 4 || shadow != tc.shadow {
			t.Errorf("%s: %+v shadow=%v; want interval %d burst 4 shadow=%v", tc.tenant, got, shadow, tc.interval, tc.shadow)
		}
	}
}
