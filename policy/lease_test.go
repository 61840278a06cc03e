package policy

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParse_lease(t *testing.T) {
	p := mustParse(t, "limits:\n  - name: hot\n    match: [tenant]\n    rate: 1000/s\n    burst: 100\n    lease: {max: 50, ttl: 250ms}\n")
	l := p.Limit("hot")
	if l.Lease == nil || l.Lease.Max != 50 || l.Lease.TTL != 250*time.Millisecond {
		t.Fatalf("Lease = %+v, want max 50 ttl 250ms", l.Lease)
	}
	ms, err := p.Resolve(map[string]string{"tenant": "a"}, nil)
	if err != nil || len(ms) != 1 {
		t.Fatalf("Resolve = %v, %v", ms, err)
	}
	if !ms[0].Leasable(3) || ms[0].Leasable(26) {
		t.Errorf("Leasable(3), Leasable(26) = %v, %v; want true, false (burst 100 < 4 x 26)", ms[0].Leasable(3), ms[0].Leasable(26))
	}
	if !p.Leases() {
		t.Error("Leases() = false for a policy with a lease")
	}
	if none := mustParse(t, "limits:\n  - {name: cold, match: [tenant], rate: 10/s, burst: 10}\n"); none.Leases() {
		t.Error("Leases() = true for a policy without one")
	}
	if w := p.LeaseWarnings(3); len(w) != 0 {
		t.Errorf("LeaseWarnings(3) = %q, want none", w)
	}
	if w := p.LeaseWarnings(30); len(w) != 1 || !strings.Contains(w[0], `"hot"`) || !strings.Contains(w[0], "not leasable") {
		t.Errorf("LeaseWarnings(30) = %q, want one line about hot", w)
	}
}

func TestParse_leaseRefused(t *testing.T) {
	head := "limits:\n  - name: hot\n    match: [tenant]\n    rate: 10/s\n    burst: 100\n"
	cases := map[string]struct{ extra, want string }{
		"strict":   {"    consistency: strict\n    lease: {max: 5, ttl: 250ms}\n", `limits[0] "hot" (test.yaml:7): lease: only fast limits`},
		"global":   {"    scope: global\n    lease: {max: 5, ttl: 250ms}\n", `limits[0] "hot" (test.yaml:7): lease: a scope: global limit cannot be leased`},
		"leasable": {"    leasable: true\n", "leasable: replaced by lease: {max: N, ttl: 250ms}"},
		"ttl":      {"    lease: {max: 5, ttl: soon}\n", `lease.ttl: "soon" is not a duration`},
		"no ttl":   {"    lease: {max: 5}\n", `lease.ttl: "" is not a duration`},
		"short":    {"    lease: {max: 5, ttl: 1ms}\n", "lease.ttl: 1ms must be in [10ms, 10s]"},
		"max":      {"    lease: {max: 0, ttl: 1s}\n", "lease.max: 0 must be in [1, 1000000]"},
		"unknown":  {"    lease: {max: 5, ttl: 1s, units: 3}\n", "field units not found"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("test.yaml", []byte(head+tc.extra))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestMatch_Leasable_shadowAndTier(t *testing.T) {
	p := mustParse(t, `tiers:
  small: {hot: {burst: 8}}
tenants:
  tiny: {tier: small}
limits:
  - name: hot
    match: [tenant]
    rate: 1000/s
    burst: 100
    lease: {max: 50, ttl: 250ms}
  - name: quiet
    match: [tenant]
    rate: 1000/s
    burst: 100
    shadow: true
    lease: {max: 50, ttl: 250ms}
`)
	ms, _ := p.Resolve(map[string]string{"tenant": "tiny"}, nil)
	if ms[0].Leasable(3) {
		t.Error("burst 8 with 3 nodes is leasable, want not (8 < 12)")
	}
	if ms[1].Leasable(3) {
		t.Error("a shadow limit is leasable, want not")
	}
	if w := p.LeaseWarnings(3); len(w) != 1 || !strings.Contains(w[0], "burst 8") {
		t.Errorf("LeaseWarnings(3) = %q, want one line for the small tier's burst 8", w)
	}
}
