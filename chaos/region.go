package chaos

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/weirhq/weir/chaos/netlab"
	"github.com/weirhq/weir/chaos/workload"
)

// RegionPolicy is the region-cut policy: one global limit, 100/s burst 50,
// shared by the regions, failing closed (a node that cannot reach its
// region's owner admits nothing, so every admission is a share's).
const RegionPolicy = `version: region.1
unknown_descriptors: reject
limits:
  - name: global
    match: [tenant]
    rate: 100/s
    burst: 50
    scope: global
    on_failure: closed
`

// regionFloor is every region's floor in the region scenarios: with burst
// 50, 5 units and 10/s, so a region cut off from the key's home still
// admits at its floor.
const regionFloor = "0.1"

// regionWorkload offers the global key at every node of both regions:
// open loop at Options.Rate (300/s by default), three times the limit,
// half of it in each region.
func regionWorkload() *Workload {
	return &Workload{
		Policy: []byte(RegionPolicy),
		Classes: []workload.Class{{Name: "global", Weight: 1, Keys: 1, Cost: 1, Limits: []string{"global"},
			Descriptors: map[string]string{"tenant": "acme"}}},
		VictimGroup: "acme",
	}
}

// RegionSuite is issue 15's chaos run: two regions of two nodes, each
// region its own cluster with its own redis-server, sharing one global
// limit; the link between the regions is dropped for 20 s and healed. The
// checker judges B + W/T across both regions with no fault term: a region
// cut off from the key's home keeps its share until its grant expires,
// then enforces its floor, and the home never hands that share out before.
func RegionSuite() []Scenario {
	cut := Nemesis{
		Name:              "region-cut",
		Summary:           "two regions of two nodes, each with its own Redis, sharing a global limit: every packet between the regions dropped, then healed",
		FaultAvailability: 0.99,
		Owners:            1, // no split term: the global bound must hold as it is
		targets:           allNodes,
		inject: func(ctx context.Context, tb *testbed, _ []*Node) (func(context.Context) error, error) {
			a, b := tb.regionHosts(0), tb.regionHosts(1)
			return tb.healNetwork, tb.lab.Partition(a, b)
		},
	}
	return []Scenario{{Nemesis: cut, Healthy: 8 * time.Second, Fault: 20 * time.Second, Recovery: 8 * time.Second,
		Nodes: 4, Regions: 2, Workload: regionWorkload()}}
}

// regionBed splits a testbed's nodes into regions: region i is the i-th
// run of len(nodes)/len(names) nodes, with its own redis-server (the
// first region's is the testbed's).
type regionBed struct {
	names  []string
	of     map[*Node]int // node -> region index
	redis  []*netlab.Host
	redisP []*netlab.Proc
}

// splitRegions makes n regions of the testbed's nodes (nothing for n <
// 2), starting a redis-server for every region after the first.
func (tb *testbed) splitRegions(ctx context.Context, n int) error {
	if n < 2 {
		return nil
	}
	if len(tb.nodes)%n != 0 {
		return fmt.Errorf("chaos: %d nodes do not split into %d regions", len(tb.nodes), n)
	}
	rb := &regionBed{of: map[*Node]int{}, redis: []*netlab.Host{tb.redis}, redisP: []*netlab.Proc{tb.redisP}}
	per := len(tb.nodes) / n
	for i := range n {
		rb.names = append(rb.names, fmt.Sprintf("r%d", i+1))
		for _, node := range tb.nodes[i*per : (i+1)*per] {
			rb.of[node] = i
		}
		if i == 0 {
			continue
		}
		h, err := tb.lab.AddHost(fmt.Sprintf("redis%d", i+1))
		if err != nil {
			return err
		}
		p, err := tb.runRedis(ctx, h)
		if err != nil {
			return err
		}
		rb.redis, rb.redisP = append(rb.redis, h), append(rb.redisP, p)
	}
	tb.regions = rb
	return nil
}

// clusterOf is the nodes n gossips with: its region's, or all of them.
func (tb *testbed) clusterOf(n *Node) []*Node { return tb.sameCluster(n, tb.nodes) }

// sameCluster is the nodes of ns in n's cluster (its region).
func (tb *testbed) sameCluster(n *Node, ns []*Node) []*Node {
	if tb.regions == nil {
		return ns
	}
	var out []*Node
	for _, o := range ns {
		if tb.regions.of[o] == tb.regions.of[n] {
			out = append(out, o)
		}
	}
	return out
}

// redisAddrOf is the Redis n persists to: its region's.
func (tb *testbed) redisAddrOf(n *Node) string {
	if tb.regions == nil {
		return tb.redisAddr()
	}
	return net.JoinHostPort(tb.regions.redis[tb.regions.of[n]].IP(), strconv.Itoa(redisPort))
}

// regionArgs are n's region flags: its region, and for every other region
// the peer address of that region's first node, with a 10% floor.
func (tb *testbed) regionArgs(n *Node) []string {
	rb := tb.regions
	if rb == nil {
		return nil
	}
	var peers string
	for i, name := range rb.names {
		if i == rb.of[n] {
			continue
		}
		if peers != "" {
			peers += ","
		}
		first := tb.nodes[i*len(tb.nodes)/len(rb.names)]
		peers += name + "=" + net.JoinHostPort(first.Host.IP(), strconv.Itoa(peerPort))
	}
	return []string{"--region", rb.names[rb.of[n]], "--region-peers", peers, "--region-floor", regionFloor}
}

// regionHosts is region i's hosts: its nodes and its Redis.
func (tb *testbed) regionHosts(i int) []*netlab.Host {
	var out []*netlab.Host
	for _, n := range tb.nodes {
		if tb.regions.of[n] == i {
			out = append(out, n.Host)
		}
	}
	return append(out, tb.regions.redis[i])
}
