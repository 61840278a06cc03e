package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/chaos/netlab"
	"github.com/weirhq/weir/redisbackend"
)

// Redis Cluster testbed (issue 22): three masters with a replica each, all
// six redis-servers on the testbed's Redis host, one port each.
const (
	clusterPort  = 7000 // the first node's; node i listens on clusterPort+i
	clusterNodes = 6    // three masters, three replicas
)

// RedisFailoverSuite is issue 22's chaos run: the nodes persist to (and
// decide strict limits in) a Redis Cluster of three masters with a
// replica each; mid-run the master serving the victim group's slot is
// SIGKILLed, its replica is promoted by Redis Cluster, and at the heal the
// killed server comes back and rejoins as a replica. The checker judges it
// like the Redis outage: the same fault terms.
func RedisFailoverSuite() []Scenario {
	n := Nemesis{
		Name:              "redis-failover",
		Summary:           "Redis Cluster, three masters with a replica each: the master of the hot tenant's slot is SIGKILLed and its replica promoted; at the heal it restarts as a replica",
		FaultAvailability: 0.99,
		Owners:            1,
		targets:           noNodes,
		inject: func(ctx context.Context, tb *testbed, _ []*Node) (func(context.Context) error, error) {
			return tb.killSlotMaster(ctx, int(redisbackend.KeySlot("{"+tb.victim+"}")))
		},
	}
	return []Scenario{{Nemesis: n, Healthy: 8 * time.Second, Fault: 12 * time.Second, Recovery: 8 * time.Second, RedisCluster: true}}
}

// redisClusterBed is a testbed's Redis Cluster: one process per port.
type redisClusterBed struct {
	procs []*netlab.Proc
}

func (tb *testbed) clusterAddr(i int) string {
	return net.JoinHostPort(tb.redis.IP(), strconv.Itoa(clusterPort+i))
}

func (tb *testbed) clusterAddrs() []string {
	out := make([]string, clusterNodes)
	for i := range out {
		out[i] = tb.clusterAddr(i)
	}
	return out
}

// startRedisCluster starts the six servers on the Redis host, joins them
// with redis-cli --cluster create --cluster-replicas 1 and waits until the
// cluster is ok and every replica is in sync.
func (tb *testbed) startRedisCluster(ctx context.Context) error {
	tb.cluster = &redisClusterBed{procs: make([]*netlab.Proc, clusterNodes)}
	for i := range clusterNodes {
		// A new cluster: the nodes.conf and RDB an earlier run left in the
		// same output directory would make the node refuse to be created
		// ("is not empty") or rejoin the old cluster.
		if err := os.RemoveAll(tb.clusterData(i)); err != nil {
			return err
		}
		if err := tb.runClusterNode(ctx, i); err != nil {
			return err
		}
	}
	args := append([]string{"--cluster", "create"}, tb.clusterAddrs()...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := tb.redis.Command("redis-cli", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("redis-cli --cluster create: %w: %s", err, out)
	}
	return waitUntil(ctx, 30*time.Second, "the Redis Cluster to be ok with replicas in sync", tb.clusterHealthy)
}

// runClusterNode starts cluster node i (again, after a kill: its
// nodes.conf makes it rejoin) and waits for PING.
func (tb *testbed) runClusterNode(ctx context.Context, i int) error {
	name := fmt.Sprintf("redis-c%d", i)
	data := tb.clusterData(i)
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	cmd := tb.redis.Command("redis-server",
		"--bind", tb.redis.IP(), "--port", strconv.Itoa(clusterPort+i),
		"--protected-mode", "no", "--save", "", "--appendonly", "no",
		"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "2000", "--cluster-replica-validity-factor", "0",
		"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
		"--dir", data, "--daemonize", "no")
	p, err := tb.redis.Start(cmd, filepath.Join(tb.dir, name+".log"))
	if err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	tb.cluster.procs[i] = p
	addr := tb.clusterAddr(i)
	return waitUntil(ctx, 10*time.Second, name+" to answer PING", func() error { return ping(addr) })
}

// clusterData is cluster node i's data directory (its nodes.conf).
func (tb *testbed) clusterData(i int) string {
	return filepath.Join(tb.dir, fmt.Sprintf("redis-c%d", i))
}

// clusterDo runs one command on cluster node i.
func (tb *testbed) clusterDo(ctx context.Context, i int, args ...any) *redis.Cmd {
	c := redis.NewClient(&redis.Options{Addr: tb.clusterAddr(i), DialTimeout: 500 * time.Millisecond,
		ReadTimeout: time.Second, WriteTimeout: time.Second, MaxRetries: -1})
	defer c.Close()
	cmd := redis.NewCmd(ctx, args...)
	_ = c.Process(ctx, cmd)
	return cmd
}

// clusterHealthy reports nil when every live node says cluster_state:ok
// and every live replica's link to its master is up.
func (tb *testbed) clusterHealthy() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for i, p := range tb.cluster.procs {
		if p == nil {
			continue
		}
		info, err := tb.clusterDo(ctx, i, "cluster", "info").Text()
		if err != nil || !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("node %d: cluster not ok (%v)", i, err)
		}
		repl, err := tb.clusterDo(ctx, i, "info", "replication").Text()
		if err != nil {
			return err
		}
		if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
			return fmt.Errorf("node %d: replica link down", i)
		}
	}
	return nil
}

// slotMaster is the index of the live node that serves slot as a master
// in its own view.
func (tb *testbed) slotMaster(ctx context.Context, slot int) (int, error) {
	for i, p := range tb.cluster.procs {
		if p == nil {
			continue
		}
		c := redis.NewClient(&redis.Options{Addr: tb.clusterAddr(i), DialTimeout: 500 * time.Millisecond, MaxRetries: -1})
		slots, err := c.ClusterSlots(ctx).Result()
		c.Close()
		if err != nil {
			continue
		}
		for _, r := range slots {
			if slot >= r.Start && slot <= r.End && len(r.Nodes) > 0 && r.Nodes[0].Addr == tb.clusterAddr(i) {
				return i, nil
			}
		}
	}
	return 0, fmt.Errorf("no live node serves slot %d", slot)
}

// killSlotMaster SIGKILLs the master of slot, records which node took
// over once Redis Cluster has promoted it, and returns the heal: restart
// the killed server, which rejoins as a replica, and wait until the
// cluster is whole again.
func (tb *testbed) killSlotMaster(ctx context.Context, slot int) (func(context.Context) error, error) {
	victim, err := tb.slotMaster(ctx, slot)
	if err != nil {
		return noHeal, err
	}
	p := tb.cluster.procs[victim]
	tb.logf("  redis-failover: killing %s, master of slot %d", tb.clusterAddr(victim), slot)
	if err := p.Kill(); err != nil {
		return noHeal, err
	}
	tb.cluster.procs[victim] = nil
	err = waitUntil(ctx, 20*time.Second, "a replica to take over the slot", func() error {
		i, err := tb.slotMaster(ctx, slot)
		if err == nil && i != victim {
			tb.logf("  redis-failover: %s promoted", tb.clusterAddr(i))
			return nil
		}
		return errors.Join(errors.New("slot not taken over yet"), err)
	})
	heal := func(ctx context.Context) error {
		if err := tb.runClusterNode(ctx, victim); err != nil {
			return err
		}
		return waitUntil(ctx, 30*time.Second, "the Redis Cluster to be whole again", tb.clusterHealthy)
	}
	return heal, err
}

// redisArgs are the flags that point node n at its Redis: the Cluster's
// seeds, or its region's single server.
func (tb *testbed) redisArgs(n *Node) []string {
	if tb.cluster != nil {
		return []string{"--redis-cluster", strings.Join(tb.clusterAddrs(), ",")}
	}
	return []string{"--redis-addr", tb.redisAddrOf(n)}
}
