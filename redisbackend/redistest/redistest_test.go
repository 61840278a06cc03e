package redistest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/weirhq/weir/redisbackend/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStart_answersAndCleansUp(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	if err := srv.Client().Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("set: %v", err)
	}
	if got := srv.Client().Get(ctx, "k").Val(); got != "v" {
		t.Fatalf("get = %q, want v", got)
	}
	cfg := srv.Client().ConfigGet(ctx, "save").Val()
	if cfg["save"] != "" {
		t.Errorf("save = %q, want empty (persistence off)", cfg["save"])
	}
}

func TestServer_PauseResume(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	if err := c.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("ping: %v", err)
	}
	srv.Pause()
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	start := time.Now()
	err := c.Ping(ctx).Err()
	cancel()
	if err == nil {
		t.Fatal("ping to a paused server succeeded")
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("paused ping took %s, want about the 100ms deadline", el)
	}
	srv.Resume()
	if err := c.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("ping after resume: %v", err)
	}
}

func TestServer_StopRestart(t *testing.T) {
	srv := redistest.Start(t)
	addr := srv.Addr()
	c := srv.Client()
	if err := c.Set(t.Context(), "k", "v", 0).Err(); err != nil {
		t.Fatalf("set: %v", err)
	}
	srv.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("ping to a stopped server succeeded")
	}
	srv.Restart()
	if srv.Addr() != addr {
		t.Fatalf("addr changed from %s to %s", addr, srv.Addr())
	}
	if n := c.Exists(t.Context(), "k").Val(); n != 0 {
		t.Errorf("key survived a restart without persistence")
	}
}

func TestStartCluster_ok(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster start takes seconds")
	}
	cl := redistest.StartCluster(t, 3)
	if n := len(cl.Addrs()); n != 3 {
		t.Fatalf("%d addrs, want 3", n)
	}
	cc := cl.ClusterClient()
	ctx := t.Context()
	for _, k := range []string{"a", "b", "c", "{x}1", "{x}2"} {
		if err := cc.Set(ctx, k, k, 0).Err(); err != nil {
			t.Fatalf("set %s: %v", k, err)
		}
	}
	info := cc.ClusterInfo(ctx).Val()
	if !strings.Contains(info, "cluster_known_nodes:3") {
		t.Errorf("cluster info: %s", info)
	}
	if got := cc.Get(ctx, "{x}2").Val(); got != "{x}2" {
		t.Errorf("get = %q", got)
	}
}

func TestStartClusterWithReplicas_failoverKillAndMigrate(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster start takes seconds")
	}
	cl := redistest.StartClusterWithReplicas(t, 3)
	if n := len(cl.Addrs()); n != 6 {
		t.Fatalf("%d addrs, want 6", n)
	}
	cc := cl.ClusterClient()
	ctx := t.Context()
	const key = "{x}k"
	slot := int(cc.ClusterKeySlot(ctx, key).Val())
	if err := cc.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatalf("set: %v", err)
	}
	first := cl.MasterOfSlot(slot)
	demoted, promoted := cl.Failover(slot)
	if demoted != first || promoted == first {
		t.Fatalf("failover: demoted %s promoted %s, first master %s", demoted.Addr(), promoted.Addr(), first.Addr())
	}
	if got := cl.MasterOfSlot(slot); got != promoted {
		t.Fatalf("slot served by %s after failover, want %s", got.Addr(), promoted.Addr())
	}
	to := cl.OtherMaster(promoted)
	cl.MigrateSlot(slot, to, 10, nil)
	if got := cl.MasterOfSlot(slot); got != to {
		t.Fatalf("slot served by %s after migration, want %s", got.Addr(), to.Addr())
	}
	// The migrated key reaches to's replica asynchronously: make sure it
	// has, or the kill may lose it (which is what a crash does).
	if n, err := to.Client().Do(ctx, "wait", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("wait for the replica: %d, %v", n, err)
	}
	killed, next := cl.KillMaster(slot)
	if killed != to || next == to {
		t.Fatalf("kill: killed %s promoted %s, want %s killed", killed.Addr(), next.Addr(), to.Addr())
	}
	// Asked of the new master itself: cc still maps the slot to the dead
	// one until something makes it reload.
	if got, err := next.Client().Get(ctx, key).Result(); got != "v" {
		t.Errorf("get after failover, migration and kill = %q (%v), want v", got, err)
	}
}
