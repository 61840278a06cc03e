package redisclock_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/redisbackend"
	"github.com/weirhq/weir/redisbackend/redistest"
	"github.com/weirhq/weir/redisclock"
)

func TestClock_Sync_realRedis(t *testing.T) {
	srv := redistest.Start(t)
	// A generous timeout: this test compares units, and the default 50ms
	// was overrun on a loaded machine.
	be, err := redisbackend.New(srv.Client(), redisbackend.Config{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c := mustNew(t, redisclock.DefaultConfig(), be, clock.Real(), nil)
	if err := c.Sync(t.Context()); err != nil {
		t.Fatalf("sync: %v", err)
	}
	const slack = int64(3 * time.Millisecond) // the sample's rtt/2 plus scheduling noise under -race
	before := c.Now()
	server, err := be.Time(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	after := c.Now()
	if server < before-slack || server > after+slack {
		t.Errorf("redis TIME %d outside [Now before - %s, Now after + %s] = [%d, %d]",
			server, time.Duration(slack), time.Duration(slack), before-slack, after+slack)
	}
}

func TestClock_Sync_pausedRedisKeepsOffset(t *testing.T) {
	srv := redistest.Start(t)
	// A generous timeout: this test compares units, and the default 50ms
	// was overrun on a loaded machine.
	be, err := redisbackend.New(srv.Client(), redisbackend.Config{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg := redisclock.DefaultConfig()
	cfg.Timeout = 20 * time.Millisecond
	c := mustNew(t, cfg, be, clock.Real(), nil)
	if err := c.Sync(t.Context()); err != nil {
		t.Fatalf("sync: %v", err)
	}
	off := c.Offset()
	srv.Pause()
	start := time.Now()
	err = c.Sync(t.Context())
	elapsed := time.Since(start)
	srv.Resume()
	if err == nil {
		t.Fatal("sync against a paused Redis succeeded")
	}
	if c.Offset() != off {
		t.Errorf("offset changed from %s to %s on failure", off, c.Offset())
	}
	if limit := time.Duration(cfg.Samples)*cfg.Timeout + time.Second; elapsed > limit {
		t.Errorf("failed sync took %s, want under %s", elapsed, limit)
	}
	if err := c.Sync(t.Context()); err != nil {
		t.Errorf("sync after resume: %v", err)
	}
}

// ClientSource and redisbackend.Backend read the same server's TIME in the
// same unit, Unix nanoseconds: a reading through one falls between two
// readings through the other.
func TestClientSource_nanosecondsLikeTheBackend(t *testing.T) {
	srv := redistest.Start(t)
	// A generous timeout: this test compares units, and the default 50ms
	// was overrun on a loaded machine.
	be, err := redisbackend.New(srv.Client(), redisbackend.Config{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	src, err := redisclock.NewClientSource(srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	before, err := be.Time(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got, err := src.Time(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	after, err := be.Time(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got < before || got > after {
		t.Errorf("ClientSource TIME %d outside the backend's [%d, %d]", got, before, after)
	}
	if got%int64(time.Microsecond) != 0 {
		t.Errorf("ClientSource TIME %d is not whole microseconds", got)
	}
}

// On a Redis Cluster every resync must ask the same master — the one that
// serves PinKey's slot — so that all nodes follow one server clock.
func TestClientSource_pinsOneClusterMaster(t *testing.T) {
	rc := redistest.StartCluster(t, 3)
	src, err := redisclock.NewClientSource(rc.ClusterClient())
	if err != nil {
		t.Fatal(err)
	}
	before := timeCalls(t, rc)
	c := mustNew(t, redisclock.DefaultConfig(), src, clock.Real(), nil)
	const syncs = 8
	for range syncs {
		if err := c.Sync(t.Context()); err != nil {
			t.Fatalf("sync: %v", err)
		}
	}
	after := timeCalls(t, rc)
	master, err := rc.ClusterClient().MasterForKey(t.Context(), redisclock.PinKey)
	if err != nil {
		t.Fatal(err)
	}
	want := syncs * redisclock.DefaultConfig().Samples
	for addr, n := range after {
		got := n - before[addr]
		switch {
		case addr == master.Options().Addr && got != want:
			t.Errorf("pinned master %s answered %d TIME commands, want %d", addr, got, want)
		case addr != master.Options().Addr && got != 0:
			t.Errorf("master %s, not the pinned one, answered %d TIME commands", addr, got)
		}
	}
}

// timeCalls returns how many TIME commands each cluster node has served.
func timeCalls(t *testing.T, rc *redistest.Cluster) map[string]int {
	t.Helper()
	out := map[string]int{}
	for i, addr := range rc.Addrs() {
		info, err := rc.Node(i).Client().Info(t.Context(), "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		out[addr] = 0
		for line := range strings.Lines(info) {
			if rest, ok := strings.CutPrefix(line, "cmdstat_time:calls="); ok {
				n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
				if err != nil {
					t.Fatal(err)
				}
				out[addr] = n
			}
		}
	}
	return out
}
