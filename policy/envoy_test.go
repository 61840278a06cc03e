package policy

import (
	"strings"
	"testing"
)

const envoyPolicy = `
limits:
  - {name: weir-own, match: [remote_address], rate: 1/s, burst: 1}
  - {name: users-db, domain: mongo_cps, match: [database], values: {database: users}, rate: 500/s, burst: 500}
  - {name: any-ip, domain: rl, match: [remote_address], rate: 10/s, burst: 10}
  - {name: trusted-ip, domain: rl, match: [remote_address], values: {remote_address: 10.0.0.1}, unlimited: true}
  - {name: pinned-b, domain: rl, match: [a, b], values: {a: x}, rate: 2/m, burst: 2}
  - {name: wild-c, domain: rl, match: [a, c], group: c, rate: 3/h, burst: 3}
  - {name: wild-a, domain: rl, match: [a], rate: 4/d, burst: 4, shadow: true}
`

func TestResolveEnvoy_walksTheTreeLikeEnvoy(t *testing.T) {
	p, err := Parse("p.yaml", []byte(envoyPolicy))
	if err != nil {
		t.Fatal(err)
	}
	e := func(kv ...string) []EnvoyEntry {
		var out []EnvoyEntry
		for i := 0; i < len(kv); i += 2 {
			out = append(out, EnvoyEntry{kv[i], kv[i+1]})
		}
		return out
	}
	tests := []struct {
		name, domain string
		entries      []EnvoyEntry
		want         string // limit name, "" for none
		key          string
	}{
		{"pinned value", "mongo_cps", e("database", "users"), "users-db", "weir:{users}:users-db:users"},
		{"other value has no node", "mongo_cps", e("database", "orders"), "", ""},
		{"unknown domain", "nope", e("database", "users"), "", ""},
		{"wildcard key", "rl", e("remote_address", "1.2.3.4"), "any-ip", "weir:{1.2.3.4}:any-ip:1.2.3.4"},
		{"pinned beats wildcard", "rl", e("remote_address", "10.0.0.1"), "trusted-ip", "weir:{10.0.0.1}:trusted-ip:10.0.0.1"},
		{"nested under pinned", "rl", e("a", "x", "b", "1"), "pinned-b", "weir:{x}:pinned-b:x:1"},
		// Envoy never backtracks: a=x goes to the pinned node, which has
		// no c below it, although the wildcard a node has.
		{"no backtracking", "rl", e("a", "x", "c", "1"), "", ""},
		{"nested under wildcard", "rl", e("a", "y", "c", "1"), "wild-c", "weir:{1}:wild-c:y:1"},
		{"leaf of a shorter path", "rl", e("a", "y"), "wild-a", "weir:{y}:wild-a:y"},
		{"pinned node without own limit", "rl", e("a", "x"), "", ""},
		{"longer than any path", "rl", e("a", "y", "c", "1", "d", "2"), "", ""},
		{"wrong order", "rl", e("c", "1", "a", "y"), "", ""},
		{"empty value", "rl", e("remote_address", ""), "", ""},
		{"no entries", "rl", nil, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, ok := p.ResolveEnvoy(tt.domain, tt.entries)
			if ok != (tt.want != "") {
				t.Fatalf("ok = %v, want a match %q", ok, tt.want)
			}
			if !ok {
				return
			}
			if m.Limit.Name != tt.want || m.Key != tt.key {
				t.Errorf("got %s %s, want %s %s", m.Limit.Name, m.Key, tt.want, tt.key)
			}
		})
	}
	if m, _ := p.ResolveEnvoy("rl", e("remote_address", "10.0.0.1")); !m.Limit.Envoy.Unlimited || m.Params.Interval != 0 {
		t.Errorf("trusted-ip: got %+v, want unlimited with zero params", m)
	}
	if m, _ := p.ResolveEnvoy("rl", e("a", "y")); !m.Shadow {
		t.Error("wild-a is shadow but its match is not")
	}
	if got := p.Domains(); strings.Join(got, ",") != "mongo_cps,rl" {
		t.Errorf("Domains() = %v", got)
	}
}

func TestResolve_leavesEnvoyLimitsOut(t *testing.T) {
	p, err := Parse("p.yaml", []byte(envoyPolicy))
	if err != nil {
		t.Fatal(err)
	}
	ms, err := p.Resolve(map[string]string{"remote_address": "1.2.3.4", "database": "users"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].Limit.Name != "weir-own" {
		t.Fatalf("Resolve matched %+v, want only weir-own", ms)
	}
}

func TestParse_envoyProblems(t *testing.T) {
	tests := []struct{ name, limits, want string }{
		{"values without domain", `{name: a, match: [k], values: {k: v}, rate: 1/s, burst: 1}`, "only allowed on a limit with a domain"},
		{"value key not in match", `{name: a, domain: d, match: [k], values: {j: v}, rate: 1/s, burst: 1}`, `values.j: "j" is not in match`},
		{"empty value", `{name: a, domain: d, match: [k], values: {k: ""}, rate: 1/s, burst: 1}`, "values.k: must be 1 to 256 bytes"},
		{"unlimited with rate", `{name: a, domain: d, match: [k], unlimited: true, rate: 1/s, burst: 1}`, "takes no rate"},
		{"limited without rate", `{name: a, domain: d, match: [k]}`, "rate: required"},
		{"same place twice", "{name: a, domain: d, match: [k], rate: 1/s, burst: 1}\n  - {name: b, domain: d, match: [k], rate: 2/s, burst: 1}", `same descriptor keys and values as limit "a"`},
		{"replaces other domain", "{name: a, domain: d, match: [k], rate: 1/s, burst: 1, replaces: [b]}\n  - {name: b, domain: e, match: [k], rate: 2/s, burst: 1}", `replaces: no limit "b" in domain "d"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte("limits:\n  - "+tt.limits+"\n"))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	// The same place in two domains is fine, and so is one unlimited limit.
	ok := "limits:\n  - {name: a, domain: d, match: [k], rate: 1/s, burst: 1}\n  - {name: b, domain: e, match: [k], unlimited: true}\n"
	if _, err := Parse("p.yaml", []byte(ok)); err != nil {
		t.Fatal(err)
	}
}
