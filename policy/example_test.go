package policy_test

import (
	"fmt"
	"time"

	"github.com/weirhq/weir/policy"
)

func Example() {
	p, err := policy.Parse("example.yaml", []byte(`
version: "2026-11-29.1"
tiers:
  pro:
    per-user: {rate: 50/s, burst: 20}
tenants:
  acme: {tier: pro}
limits:
  - name: per-user
    match: [tenant, user]
    rate: 5/s
    burst: 3
  - name: per-tenant
    match: [tenant]
    rate: 100/s
    burst: 50
    shadow: true
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	matches, err := p.Resolve(map[string]string{"tenant": "acme", "user": "u:7"}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range matches {
		fmt.Printf("%s interval=%s burst=%d shadow=%v\n", m.Key, time.Duration(m.Params.Interval), m.Params.Burst, m.Shadow)
	}
	_, err = p.Resolve(map[string]string{"tenant": "acme", "colour": "blue"}, nil)
	fmt.Println(err)
	// Output:
	// weir:{acme}:per-user:acme:u%3A7 interval=20ms burst=20 shadow=false
	// weir:{acme}:per-tenant:acme interval=10ms burst=50 shadow=true
	// policy: unknown descriptor "colour"
}

func ExampleParse_invalid() {
	_, err := policy.Parse("policy.yaml", []byte(`
limits:
  - {name: per-user, match: [tenant, user], group: team, rate: 5/x, burst: 3}
`))
	fmt.Println(err)
	// Output:
	// policy.yaml: limits[0] "per-user": group: "team" is not in match
	// policy.yaml: limits[0] "per-user": rate: "5/x" is not N/s, N/m, N/h or N/d
}

func ExampleParseRate() {
	r, err := policy.ParseRate("600/m")
	fmt.Println(r, r.N, r.Per, err)
	// Output: 600/m 600 1m0s <nil>
}
