package policy

import (
	"fmt"
	"strings"
	"testing"
)

// tenantsPolicy returns a policy of three limits, two tiers and n tenants:
// every third tenant on a tier, every fifth with its own override.
func tenantsPolicy(n int) []byte {
	var b strings.Builder
	b.WriteString("version: bench\ntiers:\n  pro:\n    per-user: {rate: 50/s, burst: 20}\n  gold:\n    per-tenant: {rate: 1000/s}\n")
	b.WriteString("tenants:\n")
	for i := range n {
		fmt.Fprintf(&b, "  t%d:", i)
		switch {
		case i%5 == 0:
			fmt.Fprintf(&b, " {tier: pro, overrides: {per-tenant: {rate: %d/s, burst: %d}}}\n", 100+i%1000, 10+i%50)
		case i%3 == 0:
			b.WriteString(" {tier: gold}\n")
		default:
			b.WriteString(" {}\n")
		}
	}
	b.WriteString(`limits:
  - {name: per-user, match: [tenant, user], rate: 5/s, burst: 3}
  - {name: per-tenant, match: [tenant], rate: 100/s, burst: 50}
  - {name: per-route, match: [tenant, route], rate: 20/s, burst: 10, shadow: true}
`)
	return []byte(b.String())
}

// BenchmarkLoad_tenants parses and builds policies of 10k, 50k and 100k
// tenants. Load time must grow linearly with the tenant count.
func BenchmarkLoad_tenants(b *testing.B) {
	for _, n := range []int{10_000, 50_000, 100_000} {
		data := tenantsPolicy(n)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := Parse("bench.yaml", data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
