package chaos

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/weirhq/weir/chaos/netlab"
)

// Nemesis is one kind of fault.
type Nemesis struct {
	Name    string
	Summary string // what it does, for the report and docs
	// Owners and Crash are the documented fault terms the checker may
	// apply while the fault lasts (see history.Event).
	Owners int
	Crash  bool
	Stale  bool
	// Starved: the fault leaves its targets too little CPU to answer their
	// own callers; calls sent to them are reported, not judged
	// (history.Event.Starved).
	Starved bool
	// FaultAvailability is the share of calls that must be answered within
	// their deadline while the fault lasts: 0.999 when every node reaches
	// every other node and Redis (gray faults: CPU starvation, stalls,
	// slowness); 0.99 while the network is cut between nodes or from Redis
	// (until the breaker learns that a silent owner is gone, its callers
	// wait out their budget, and a node descheduled in that window answers
	// a few of them late: docs/chaos.md); not judged when a node is down or
	// frozen (the calls the client sends it cannot be answered).
	FaultAvailability float64
	// targets picks the nodes the fault hits (the victim, every node, or
	// none for a fault on Redis).
	targets func(tb *testbed) []*Node
	// inject starts the fault on the targets and returns how to heal it. Heal returns once the healing act is done (rules removed,
	// process started and serving); the runner records the fault's end
	// then, and waits for the cluster to agree on its members as part of
	// the recovery.
	inject func(ctx context.Context, tb *testbed, targets []*Node) (heal func(context.Context) error, err error)
}

// convergeLimit bounds how long a healed cluster may take to agree on its
// members again (gossip suspicion and rejoin take a few seconds).
const convergeLimit = 40 * time.Second

// victim targets the node whose loss hurts most: the owner of the victim
// group (Options.VictimGroup, by default the first hot tenant's).
func victim(tb *testbed) []*Node { return []*Node{tb.owner(tb.victim)} }

func allNodes(tb *testbed) []*Node { return tb.nodes }

func noNodes(*testbed) []*Node { return nil }

func (tb *testbed) others(n *Node) []*Node {
	var out []*Node
	for _, o := range tb.nodes {
		if o != n {
			out = append(out, o)
		}
	}
	return out
}

// healNetwork removes every fault rule.
func (tb *testbed) healNetwork(context.Context) error { return tb.lab.Heal() }

// restartNode starts a stopped or killed node again and waits until it
// serves.
func (tb *testbed) restartNode(ctx context.Context, n *Node) error {
	if err := tb.startNode(n); err != nil {
		return err
	}
	return waitUntil(ctx, 20*time.Second, n.Name+" to serve", func() error {
		_, err := members(n)
		return err
	})
}

// classicNemeses are the network and process faults: partitions, kills,
// pauses, Redis outages and restarts.
func classicNemeses() []Nemesis {
	return []Nemesis{
		{
			Name:              "partition-node",
			Summary:           "the hot tenant's owner is cut off from the other nodes; every node still reaches Redis and the clients reach every node",
			FaultAvailability: 0.99,
			Owners:            2,
			Stale:             true,
			targets:           victim,
			inject: func(ctx context.Context, tb *testbed, v []*Node) (func(context.Context) error, error) {
				return tb.healNetwork, tb.lab.Partition(hosts(v), hosts(tb.others(v[0])))
			},
		},
		{
			Name:              "minority-partition",
			Summary:           "majority/minority split: the hot tenant's owner alone on one side, the other two nodes and Redis on the other",
			FaultAvailability: 0.99,
			Owners:            2,
			Stale:             true,
			targets:           victim,
			inject: func(ctx context.Context, tb *testbed, v []*Node) (func(context.Context) error, error) {
				return tb.healNetwork, tb.lab.Partition(hosts(v), append(hosts(tb.others(v[0])), tb.redis))
			},
		},
		{
			Name:              "redis-cut",
			Summary:           "every node is cut off from Redis; the nodes still reach each other",
			FaultAvailability: 0.99,
			Owners:            1,
			targets:           allNodes,
			inject: func(ctx context.Context, tb *testbed, all []*Node) (func(context.Context) error, error) {
				return tb.healNetwork, tb.lab.Partition(hosts(all), []*netlab.Host{tb.redis})
			},
		},
		{
			Name:              "one-way",
			Summary:           "packets from the hot tenant's owner to the other nodes are dropped; the reverse direction still flows",
			FaultAvailability: 0.99,
			Owners:            2,
			Stale:             true,
			targets:           victim,
			inject: func(ctx context.Context, tb *testbed, v []*Node) (func(context.Context) error, error) {
				for _, o := range tb.others(v[0]) {
					if err := tb.lab.Block(v[0].Host, o.Host); err != nil {
						return tb.healNetwork, err
					}
				}
				return tb.healNetwork, nil
			},
		},
		{
			Name:    "kill-owner",
			Summary: "the hot tenant's owner is SIGKILLed (its unflushed TATs are lost), then restarted",
			Owners:  2,
			Crash:   true,
			targets: victim,
			inject: func(ctx context.Context, tb *testbed, v []*Node) (func(context.Context) error, error) {
				return func(ctx context.Context) error { return tb.restartNode(ctx, v[0]) }, v[0].Proc().Kill()
			},
		},
		{
			Name:    "pause-owner",
			Summary: "the hot tenant's owner is frozen with SIGSTOP, then resumed with SIGCONT",
			// While frozen it decides nothing; once resumed it must not
			// decide from the memory it had before the freeze.
			Owners:  1,
			Stale:   true,
			targets: victim,
			inject: func(ctx context.Context, tb *testbed, v []*Node) (func(context.Context) error, error) {
				p := v[0].Proc()
				return func(context.Context) error { return p.Signal(syscall.SIGCONT) }, p.Signal(syscall.SIGSTOP)
			},
		},
		{
			Name:              "redis-outage",
			Summary:           "redis-server is SIGKILLed, then restarted from its append-only file",
			FaultAvailability: 0.99,
			Owners:            1,
			targets:           noNodes,
			inject: func(ctx context.Context, tb *testbed, _ []*Node) (func(context.Context) error, error) {
				return tb.startRedis, tb.redisP.Kill()
			},
		},
		{
			Name:              "rolling-restart",
			Summary:           "every node in turn gets SIGTERM (flush, hand-off, leave), is started again and rejoins before the next",
			FaultAvailability: 0.9,
			Owners:            2,
			targets:           allNodes,
			inject: func(ctx context.Context, tb *testbed, all []*Node) (func(context.Context) error, error) {
				for _, n := range all {
					tb.logf("  rolling: restarting %s", n.Name)
					if err := tb.stopNode(ctx, n, 15*time.Second); err != nil {
						return noHeal, err
					}
					if err := tb.restartNode(ctx, n); err != nil {
						return noHeal, fmt.Errorf("restart %s: %w", n.Name, err)
					}
					if err := tb.waitConverged(ctx, convergeLimit); err != nil {
						return noHeal, err
					}
				}
				return noHeal, nil
			},
		},
	}
}

// Nemeses is every fault the suite knows, by name: the network and process
// faults above, then the gray failures (gray.go).
func Nemeses() []Nemesis { return append(classicNemeses(), grayNemeses()...) }

func noHeal(context.Context) error { return nil }

// NemesisByName finds a nemesis.
func NemesisByName(name string) (Nemesis, bool) {
	for _, n := range Nemeses() {
		if n.Name == name {
			return n, true
		}
	}
	return Nemesis{}, false
}
