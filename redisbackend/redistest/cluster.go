package redistest

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterTimeout bounds building the cluster and waiting for it to settle.
const clusterTimeout = 60 * time.Second

// Cluster is a Redis Cluster, masters only ([StartCluster]) or each master
// with a replica ([StartClusterWithReplicas]), each node a [Server], owned
// by a test and torn down by t.Cleanup.
type Cluster struct {
	t     testing.TB
	nodes []*Server

	mu     sync.Mutex
	client *redis.ClusterClient
}

// StartCluster starts masters (>= 3, Redis Cluster's minimum) cluster-enabled
// redis-servers on free loopback ports whose bus ports (port+10000) are free
// too, joins them with `redis-cli --cluster create` (no replicas) and waits
// until every node reports cluster_state:ok. redis-cli must be on PATH.
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	if masters < 3 {
		t.Fatalf("redistest: a Redis Cluster needs at least 3 masters, got %d", masters)
	}
	cli := redisCLI(t)
	c := &Cluster{t: t}
	t.Cleanup(c.cleanup)
	for range masters {
		c.nodes = append(c.nodes, startClusterNode(t))
	}
	c.create(cli, 0)
	return c
}

// create joins c's servers with `redis-cli --cluster create`, replicas per
// master, and waits until every node reports cluster_state:ok.
func (c *Cluster) create(cli string, replicas int) {
	args := []string{"--cluster", "create"}
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	ctx, cancel := ctxTimeout(clusterTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		c.t.Fatalf("redistest: redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	c.waitOK()
}

// startClusterNode starts one cluster-enabled server, retrying on ports lost
// to a race. extra args come after the defaults, so they override them.
func startClusterNode(t testing.TB, extra ...string) *Server {
	t.Helper()
	s := &Server{t: t, dir: t.TempDir(), args: append([]string{
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "5000",
	}, extra...)}
	t.Cleanup(s.cleanup)
	var lastErr error
	for range portAttempts {
		port, err := freePort(true)
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		if lastErr = s.startOn(port); lastErr == nil {
			return s
		}
	}
	t.Fatalf("redistest: starting cluster node: %v", lastErr)
	return nil
}

// waitOK polls CLUSTER INFO on every node until all say cluster_state:ok.
func (c *Cluster) waitOK() {
	c.t.Helper()
	deadline := time.Now().Add(clusterTimeout)
	for _, n := range c.nodes {
		for {
			info, err := n.Client().ClusterInfo(c.t.Context()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("redistest: node %s not ok after %s: err=%v info=%q", n.Addr(), clusterTimeout, err, info)
			}
			<-time.After(pollInterval)
		}
	}
}

// Addrs lists the nodes' "127.0.0.1:port" addresses.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Node returns the i-th node, for pausing or stopping it: the i-th master
// of a cluster from [StartCluster]; any of the masters and replicas of one
// from [StartClusterWithReplicas].
func (c *Cluster) Node(i int) *Server { return c.nodes[i] }

// ClusterClient returns a go-redis cluster client, created on first use and
// closed at cleanup, with ContextTimeoutEnabled set. Safe for concurrent
// use.
func (c *Cluster) ClusterClient() *redis.ClusterClient {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client == nil {
		c.client = redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                 c.Addrs(),
			ContextTimeoutEnabled: true,
			DialTimeout:           time.Second,
			ReadTimeout:           2 * time.Second,
			WriteTimeout:          2 * time.Second,
		})
	}
	return c.client
}

func (c *Cluster) cleanup() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client != nil {
		_ = c.client.Close()
		c.client = nil
	}
	// The nodes' own cleanups (registered earlier, so run later) kill them.
}

// String describes the cluster for test logs.
func (c *Cluster) String() string {
	return fmt.Sprintf("redis cluster %s", strings.Join(c.Addrs(), ","))
}
