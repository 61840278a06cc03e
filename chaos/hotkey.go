package chaos

import (
	"context"
	"time"

	"github.com/weirhq/weir/chaos/workload"
)

// HotKeyPolicy is the policy of issue 10's runs: the limit hot, 100/s
// burst 10 on [tenant, hot], with the default failure policy (it writes no
// on_failure), so the runs judge whatever the default is; and issue 13's
// leasable twin hotlease, 100/s burst 40 (enough to lease with three
// nodes), in the same group.
const HotKeyPolicy = `version: hotkey.2
unknown_descriptors: reject
limits:
  - name: hot
    match: [tenant, hot]
    rate: 100/s
    burst: 10
  - name: hotlease
    match: [tenant, hotlease]
    rate: 100/s
    burst: 40
    lease: {max: 20, ttl: 250ms}
`

// hotKeyWorkload hits the hot key and the leasable hot key, half the calls
// each, through every node with 12 closed-loop workers (four per node) for
// 5 s.
func hotKeyWorkload() *Workload {
	return &Workload{
		Policy: []byte(HotKeyPolicy),
		Classes: []workload.Class{
			{Name: "hot", Weight: 1, Keys: 1, Cost: 1, Limits: []string{"hot"},
				Descriptors: map[string]string{"tenant": "acme", "hot": "k"}},
			{Name: "hotlease", Weight: 1, Keys: 1, Cost: 1, Limits: []string{"hotlease"},
				Descriptors: map[string]string{"tenant": "acme", "hotlease": "k"}},
		},
		VictimGroup: "acme",
		Workers:     12,
		Duration:    5 * time.Second,
	}
}

// HotKeySuite reproduces issue 10's runs: three nodes and Redis, the hot
// key (and its leasable twin) hit through all three nodes by 12
// closed-loop workers for 5 s, (a) on an idle machine, (b) with three CPU
// hogs, (c) with the hogs and every node in turn stopped for 60 ms every
// 200 ms. The whole 5 s is the fault phase; the bound over it is
// B + 5s/T = 510 (540 for the leasable twin).
func HotKeySuite() []Scenario {
	run := func(n Nemesis) Scenario {
		return Scenario{Nemesis: n, Fault: 5 * time.Second, Workload: hotKeyWorkload()}
	}
	return []Scenario{
		run(Nemesis{Name: "hotkey-idle", Summary: "issue 10 run (a): no fault, the hot key through every node",
			FaultAvailability: 0.999, Owners: 1, targets: noNodes,
			inject: func(context.Context, *testbed, []*Node) (func(context.Context) error, error) { return noHeal, nil }}),
		run(Nemesis{Name: "hotkey-hogs", Summary: "issue 10 run (b): three CPU hogs on the machine (one in each node's namespace)",
			FaultAvailability: 0.999, Owners: 1, targets: allNodes, inject: hogs}),
		run(Nemesis{Name: "hotkey-stalls", Summary: "issue 10 run (c): the hogs, and every node in turn stopped 60ms every 200ms",
			FaultAvailability: 0.999, Owners: 1, targets: allNodes, inject: both(hogs, stalls)}),
	}
}
