package policy_test

import (
	"fmt"
	"time"

	"github.com/weirhq/weir/decide"
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

// A concurrency limit's numbers are its permit bound: decide.PermitLimit
// reads Match.Params as max_in_flight and the permit ttl.
func ExampleParse_concurrency() {
	p, err := policy.Parse("example.yaml", []byte(`
tenants:
  acme: {overrides: {exports: {max_in_flight: 200}}}
limits:
  - name: exports
    kind: concurrency
    match: [tenant, op]
    max_in_flight: 20
    ttl: 2m
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, tenant := range []string{"acme", "other"} {
		ms, _ := p.Resolve(map[string]string{"tenant": tenant, "op": "export"}, nil)
		maxInFlight, ttl := decide.PermitLimit(ms[0].Params)
		fmt.Printf("%s kind=%s max_in_flight=%d ttl=%s on_failure=%s concurrency=%v\n",
			ms[0].Key, ms[0].Limit.Kind, maxInFlight, time.Duration(ttl), ms[0].Limit.OnFailure, ms[0].Limit.Def().Concurrency)
	}
	_, err = policy.Parse("bad.yaml", []byte("limits:\n  - {name: exports, kind: concurrency, match: [tenant], max_in_flight: 5, on_failure: local}\n"))
	fmt.Println(err)
	// Output:
	// weir:{acme}:exports:acme:export kind=concurrency max_in_flight=200 ttl=2m0s on_failure=closed concurrency=true
	// weir:{other}:exports:other:export kind=concurrency max_in_flight=20 ttl=2m0s on_failure=closed concurrency=true
	// bad.yaml: limits[0] "exports": on_failure: local cannot be used on a concurrency limit (one node alone cannot count the permits others hold, nor release them); use closed (the default for concurrency limits) or open (admitted without a permit)
}
