package policy

import (
	"errors"
	"strings"
	"testing"
)

// The tenants mapping decodes itself (see fileTenants); it must refuse what
// the strict decoder refused, with the same kind of message.
func TestParse_tenantsInvalid(t *testing.T) {
	const lim = "limits: [{name: ok, match: [tenant], rate: 1/s, burst: 1}]\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"duplicate tenant", "tenants:\n  a: {}\n  b: {}\n  a: {tier: x}\n" + lim, `line 4: mapping key "a" already defined at line 2`},
		{"unknown tenant field", "tenants:\n  a: {tir: pro}\n" + lim, "line 2: field tir not found in a tenant"},
		{"unknown override field", "tenants:\n  a: {overrides: {ok: {rat: 1/s}}}\n" + lim, "line 2: field rat not found in a tier or override entry"},
		{"tenants a list", "tenants: [a, b]\n" + lim, "cannot unmarshal !!seq into tenants (a mapping)"},
		{"tenant a list", "tenants: {a: [1]}\n" + lim, "cannot unmarshal"},
		{"non-string tenant name", "tenants: {[a]: {}}\n" + lim, "a tenant name must be a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("test.yaml", []byte(tc.yaml))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestParse_tenantsNull(t *testing.T) {
	p, err := Parse("test.yaml", []byte("tenants: ~\nlimits: [{name: ok, match: [tenant], rate: 1/s, burst: 1}]\n"))
	if err != nil || len(p.tenants) != 0 {
		t.Fatalf("Parse = %v, %v; want a policy without tenants", p, err)
	}
}
