package chaos

import (
	"time"

	"github.com/weirhq/weir/chaos/workload"
	"github.com/weirhq/weir/policy"
)

// RLQSPolicy is the RLQS scenario's policy: one Envoy limit, 100/s burst
// 1000 (RLQS needs a burst of at least 8.2 × the rate: docs/envoy.md,
// "RLS or RLQS"), leased for 3s, failing closed.
const RLQSPolicy = `version: rlqs.1
limits:
  - name: rlqs
    domain: edge
    match: [tenant]
    rate: 100/s
    burst: 1000
    on_failure: closed
    lease: {max: 1000, ttl: 3s}
`

// rlqsWorkload offers the default rate (340/s, over three times the
// limit) through one emulated Envoy per node, each deciding locally from
// the token buckets its RLQS stream is assigned.
func rlqsWorkload() *Workload {
	p, err := policy.Parse("rlqs policy", []byte(RLQSPolicy))
	if err != nil {
		panic("chaos: " + err.Error())
	}
	m, _ := p.ResolveEnvoy("edge", []policy.EnvoyEntry{{Key: "tenant", Value: "acme"}})
	return &Workload{
		Policy: []byte(RLQSPolicy),
		Classes: []workload.Class{{Name: "rlqs", Weight: 1, Keys: 1, Cost: 1, Limits: []string{"rlqs"},
			Descriptors: map[string]string{"tenant": "acme"},
			RLQS:        &workload.RLQS{Domain: "edge", Key: m.Key, ReportingInterval: time.Second}}},
		VictimGroup: "acme",
	}
}

// RLQSSuite is the RLQS scenario: Envoys on every node share one limit
// through RLQS while the key's owner is SIGKILLed and restarted; every
// window of the Envoys' own decisions stays within B + W/T.
func RLQSSuite() []Scenario {
	s := scenario("kill-owner", 12*time.Second)
	s.Nemesis.Name = "rlqs-kill-owner"
	s.Nemesis.Summary = "Envoys deciding locally through RLQS on every node; the key's owner is SIGKILLed, then restarted"
	s.Workload = rlqsWorkload()
	return []Scenario{s}
}
