package forward

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// persistFixture is one node with Redis, the key pair of tenant "p1", and
// a direct client to look at what Redis holds.
type persistFixture struct {
	tc    *testCluster
	node  *testNode
	kv    map[string]string
	keys  []string
	redis *redis.Client
}

func newPersistFixture(t *testing.T) *persistFixture {
	tc := newTestCluster(t, 1, true)
	node := tc.nodes["node-0"]
	client := redis.NewClient(&redis.Options{Addr: tc.redis.Addr()})
	t.Cleanup(func() { client.Close() })
	return &persistFixture{tc: tc, node: node, redis: client,
		kv: map[string]string{"tenant": "p1", "user": "u1"}, keys: []string{"weir:{p1}:per-user:p1:u1", "weir:{p1}:per-tenant:p1"}}
}

func (f *persistFixture) loads() float64 {
	return f.tc.metric("node-0", "weir_owner_state_loads_total")
}

// inRedis flushes the write-behind and reports how many of f.keys Redis holds.
func (f *persistFixture) inRedis(t *testing.T) int64 {
	t.Helper()
	ctx := context.Background()
	if err := f.node.wb.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := f.redis.Exists(ctx, f.keys...).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRouter_sweptKeyIsNotReloadedWhileOwned(t *testing.T) {
	f := newPersistFixture(t)
	f.tc.decide("node-0", f.kv)
	if f.loads() != 1 {
		t.Fatalf("first touch: %v loads, want 1", f.loads())
	}
	f.tc.clock.Add(time.Second) // both keys rest
	if n := f.node.owner.Sweep(f.tc.clock.Nanos()); n != 2 {
		t.Fatalf("swept %d keys, want 2", n)
	}
	if d := f.tc.decide("node-0", f.kv); !d.Allowed || d.Remaining != 4 {
		t.Fatalf("after the sweep: %+v, want a rested key's answer", d)
	}
	if f.loads() != 1 {
		t.Fatalf("a key this owner swept was loaded again (%v loads)", f.loads())
	}
	// Any drop moves the epoch (here a rejoin-style reload of everything):
	// what was swept before it must be loaded again.
	f.tc.clock.Add(time.Second)
	f.node.owner.Sweep(f.tc.clock.Nanos())
	f.node.router.Handoff(context.Background())
	f.tc.decide("node-0", f.kv)
	if f.loads() != 2 {
		t.Fatalf("after a drop: %v loads, want 2", f.loads())
	}
}

func TestRouter_admissionNearRestIsNotPersisted_untilHandoff(t *testing.T) {
	f := newPersistFixture(t)
	f.tc.decide("node-0", f.kv) // one unit from rested on both limits
	if n := f.inRedis(t); n != 0 {
		t.Fatalf("an admission within PersistSlack was written: %d keys in Redis", n)
	}
	f.tc.decide("node-0", f.kv) // two units: per-user (burst 5) must persist
	if n := f.inRedis(t); n != 2 {
		t.Fatalf("%d keys in Redis after two units, want 2", n)
	}
	f.tc.clock.Add(time.Second)
	f.tc.decide("node-0", f.kv) // rested, then one unit: not written...
	tats := []int64{f.node.mem.Get("p1", f.keys[0]), f.node.mem.Get("p1", f.keys[1])}
	f.node.router.Handoff(context.Background()) // ...until the hand-off
	got, err := f.node.redis.LoadTATs(context.Background(), f.keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range f.keys {
		if got[i] != tats[i] {
			t.Fatalf("%s after the hand-off: %d, want the held TAT %d", k, got[i], tats[i])
		}
	}
}

// TestRouter_coldLoadIsOneCommand checks that loading a cold composite
// (two keys of one group) costs Redis one command and that
// weir_redis_commands_total{op="load_tats"} counts it as one, as Redis does.
func TestRouter_coldLoadIsOneCommand(t *testing.T) {
	f := newPersistFixture(t)
	ctx := context.Background()
	if err := f.redis.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	f.tc.decide("node-0", f.kv)
	if got := f.tc.metric("node-0", "weir_redis_commands_total", "op", "load_tats"); got != 1 {
		t.Fatalf("load_tats counted %v commands for one cold load, want 1", got)
	}
	stats, err := f.redis.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stats, "cmdstat_mget:calls=1,") || strings.Contains(stats, "cmdstat_get:") {
		t.Fatalf("one cold load of two keys should be one MGET; Redis saw:\n%s", stats)
	}
}
