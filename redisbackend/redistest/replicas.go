package redistest

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// replicaNodeTimeout is cluster-node-timeout for clusters with replicas:
// a killed master is declared failed and its replica promoted within a few
// times this, which keeps failover tests short.
const replicaNodeTimeout = "1000"

// StartClusterWithReplicas starts a Redis Cluster of masters (>= 3)
// masters, each with one replica, joined with `redis-cli --cluster create
// --cluster-replicas 1`, and waits until every node reports
// cluster_state:ok and every replica's link to its master is up. Nodes use
// cluster-node-timeout 1s, so a killed master's replica takes over within
// a few seconds, and cluster-replica-validity-factor 0, so a replica is
// promoted however long its link was down. redis-cli must be on PATH.
//
// [Cluster.Node] indexes all 2×masters servers; which are masters changes
// with failovers, so find them by slot with [Cluster.MasterOfSlot].
func StartClusterWithReplicas(t testing.TB, masters int) *Cluster {
	t.Helper()
	if masters < 3 {
		t.Fatalf("redistest: a Redis Cluster needs at least 3 masters, got %d", masters)
	}
	cli := redisCLI(t)
	c := &Cluster{t: t}
	t.Cleanup(c.cleanup)
	for range 2 * masters {
		c.nodes = append(c.nodes, startClusterNode(t,
			"--cluster-node-timeout", replicaNodeTimeout,
			"--cluster-replica-validity-factor", "0",
			"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"))
	}
	c.create(cli, 1)
	c.waitReplicasInSync()
	return c
}

// redisCLI returns the path of redis-cli or fails the test with a hint.
func redisCLI(t testing.TB) string {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("redistest: redis-cli not found on PATH (%v); it builds the test cluster. "+
			"Install it with: sudo apt-get update && sudo apt-get install -y redis-server (or redis-tools)", err)
	}
	return cli
}

// waitReplicasInSync waits until every live replica reports
// master_link_status:up, so a master killed next has a replica holding its
// data.
func (c *Cluster) waitReplicasInSync() {
	c.t.Helper()
	c.waitFor("every replica in sync with its master", func() error {
		for _, n := range c.live() {
			info, err := n.Client().Info(c.t.Context(), "replication").Result()
			if err != nil {
				return err
			}
			if strings.Contains(info, "role:slave") && !strings.Contains(info, "master_link_status:up") {
				return fmt.Errorf("replica %s: link not up", n.Addr())
			}
		}
		return nil
	})
}

// live is the nodes not stopped.
func (c *Cluster) live() []*Server {
	var out []*Server
	for _, n := range c.nodes {
		n.mu.Lock()
		up := n.proc != nil
		n.mu.Unlock()
		if up {
			out = append(out, n)
		}
	}
	return out
}

// waitFor polls cond until it returns nil, failing the test after
// clusterTimeout with its last error.
func (c *Cluster) waitFor(what string, cond func() error) {
	c.t.Helper()
	deadline := time.Now().Add(clusterTimeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("redistest: %s: not within %s: %v", what, clusterTimeout, err)
		}
		<-time.After(pollInterval)
	}
}

// NodeID is the server's Redis Cluster node ID (CLUSTER MYID).
func (s *Server) NodeID() string {
	s.t.Helper()
	id, err := s.Client().Do(s.t.Context(), "cluster", "myid").Text()
	if err != nil {
		s.t.Fatalf("redistest: cluster myid on %s: %v", s.Addr(), err)
	}
	return id
}

// MasterOfSlot returns the live node that serves slot as a master in its
// own view (CLUSTER SLOTS asked of the node itself).
func (c *Cluster) MasterOfSlot(slot int) *Server {
	c.t.Helper()
	var found *Server
	c.waitFor(fmt.Sprintf("a master of slot %d", slot), func() error {
		found = nil
		for _, n := range c.live() {
			if owner, err := slotOwner(c.t, n, slot); err == nil && owner == n.Addr() {
				found = n
				return nil
			}
		}
		return fmt.Errorf("no live node serves slot %d", slot)
	})
	return found
}

// slotOwner is the address node n names as the master of slot.
func slotOwner(t testing.TB, n *Server, slot int) (string, error) {
	slots, err := n.Client().ClusterSlots(t.Context()).Result()
	if err != nil {
		return "", err
	}
	for _, r := range slots {
		if slot >= r.Start && slot <= r.End && len(r.Nodes) > 0 {
			return r.Nodes[0].Addr, nil
		}
	}
	return "", fmt.Errorf("slot %d unassigned in %s's view", slot, n.Addr())
}

// ReplicaOf returns the live replica of master.
func (c *Cluster) ReplicaOf(master *Server) *Server {
	c.t.Helper()
	host, port := "127.0.0.1", master.Addr()[strings.LastIndexByte(master.Addr(), ':')+1:]
	var found *Server
	c.waitFor("a replica of "+master.Addr(), func() error {
		for _, n := range c.live() {
			info, err := n.Client().Info(c.t.Context(), "replication").Result()
			if err == nil && strings.Contains(info, "role:slave") &&
				strings.Contains(info, "master_host:"+host+"\r\nmaster_port:"+port+"\r\n") {
				found = n
				return nil
			}
		}
		return fmt.Errorf("no replica of %s", master.Addr())
	})
	return found
}

// KillMaster kills (SIGKILL) the master of slot and waits until its
// replica has taken the slot over in the view of every live node and the
// cluster is ok again. It returns the killed master and the promoted
// replica.
func (c *Cluster) KillMaster(slot int) (killed, promoted *Server) {
	c.t.Helper()
	killed = c.MasterOfSlot(slot)
	promoted = c.ReplicaOf(killed)
	killed.Stop()
	c.waitSlotServedBy(slot, promoted)
	return killed, promoted
}

// Failover runs CLUSTER FAILOVER (the coordinated, lossless kind) on the
// replica of slot's master and waits until the replica serves the slot in
// every live node's view. It returns the old master (now a replica) and
// the new one.
func (c *Cluster) Failover(slot int) (demoted, promoted *Server) {
	c.t.Helper()
	demoted = c.MasterOfSlot(slot)
	promoted = c.ReplicaOf(demoted)
	// A manual failover gives up by itself when the replica cannot catch
	// up in time (a loaded machine), leaving the roles as they were; ask
	// again until the replica reports itself master.
	c.waitFor("cluster failover to "+promoted.Addr(), func() error {
		if isMaster(c.t, promoted) {
			return nil
		}
		if err := promoted.Client().Do(c.t.Context(), "cluster", "failover").Err(); err != nil {
			return fmt.Errorf("cluster failover on %s: %w", promoted.Addr(), err)
		}
		deadline := time.Now().Add(failoverAttempt)
		for time.Now().Before(deadline) {
			if isMaster(c.t, promoted) {
				return nil
			}
			<-time.After(pollInterval)
		}
		return fmt.Errorf("%s still a replica %s after CLUSTER FAILOVER", promoted.Addr(), failoverAttempt)
	})
	c.waitSlotServedBy(slot, promoted)
	return demoted, promoted
}

// failoverAttempt is how long one CLUSTER FAILOVER is given before it is
// asked again.
const failoverAttempt = 5 * time.Second

// waitSlotServedBy waits until every live node names want as slot's
// master and reports cluster_state:ok.
func (c *Cluster) waitSlotServedBy(slot int, want *Server) {
	c.t.Helper()
	c.waitFor(fmt.Sprintf("slot %d served by %s", slot, want.Addr()), func() error {
		for _, n := range c.live() {
			owner, err := slotOwner(c.t, n, slot)
			if err != nil {
				return err
			}
			if owner != want.Addr() {
				return fmt.Errorf("%s names %s", n.Addr(), owner)
			}
			info, err := n.Client().ClusterInfo(c.t.Context()).Result()
			if err != nil {
				return err
			}
			if !strings.Contains(info, "cluster_state:ok") {
				return fmt.Errorf("%s: cluster not ok", n.Addr())
			}
		}
		return nil
	})
}

// MigrateSlot moves slot from its master to the master to, the way
// `redis-cli --cluster reshard` does: SETSLOT IMPORTING and MIGRATING,
// then MIGRATE of batch keys at a time (clients meanwhile get ASK for the
// keys already moved), then SETSLOT NODE on every master. between, when
// not nil, runs after each batch, so a test can decide while the slot is
// half moved. It waits until every live node names to as the slot's
// master.
func (c *Cluster) MigrateSlot(slot int, to *Server, batch int, between func()) {
	c.t.Helper()
	from := c.MasterOfSlot(slot)
	if from == to {
		c.t.Fatalf("redistest: slot %d already on %s", slot, to.Addr())
	}
	ctx := c.t.Context()
	fromID, toID := from.NodeID(), to.NodeID()
	s := strconv.Itoa(slot)
	c.do(to, "cluster", "setslot", s, "importing", fromID)
	c.do(from, "cluster", "setslot", s, "migrating", toID)
	host, port := "127.0.0.1", to.Addr()[strings.LastIndexByte(to.Addr(), ':')+1:]
	for {
		keys, err := from.Client().ClusterGetKeysInSlot(ctx, slot, batch).Result()
		if err != nil {
			c.t.Fatalf("redistest: getkeysinslot %d on %s: %v", slot, from.Addr(), err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"migrate", host, port, "", 0, 5000, "keys"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := from.Client().Do(ctx, args...).Err(); err != nil {
			c.t.Fatalf("redistest: migrate from %s: %v", from.Addr(), err)
		}
		if between != nil {
			between()
		}
	}
	// The target first, then the source, then the others, as redis-cli
	// does, so no node points clients back at the source.
	c.do(to, "cluster", "setslot", s, "node", toID)
	c.do(from, "cluster", "setslot", s, "node", toID)
	for _, n := range c.live() {
		if n != to && n != from && isMaster(c.t, n) {
			c.do(n, "cluster", "setslot", s, "node", toID)
		}
	}
	c.waitSlotServedBy(slot, to)
}

func (c *Cluster) do(n *Server, args ...any) {
	c.t.Helper()
	if err := n.Client().Do(c.t.Context(), args...).Err(); err != nil {
		c.t.Fatalf("redistest: %v on %s: %v", args, n.Addr(), err)
	}
}

func isMaster(t testing.TB, n *Server) bool {
	info, err := n.Client().Info(t.Context(), "replication").Result()
	return err == nil && strings.Contains(info, "role:master")
}

// OtherMaster returns a live master other than not, for a slot migration's
// target.
func (c *Cluster) OtherMaster(not *Server) *Server {
	c.t.Helper()
	for _, n := range c.live() {
		if n != not && isMaster(c.t, n) {
			return n
		}
	}
	c.t.Fatalf("redistest: no master besides %s", not.Addr())
	return nil
}
