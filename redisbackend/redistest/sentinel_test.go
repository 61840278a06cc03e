package redistest_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/redisbackend/redistest"
)

func TestStartSentinel_failsOverWhenTheMasterStops(t *testing.T) {
	g := redistest.StartSentinel(t, redistest.SentinelOptions{Password: "sentinel-secret"})
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: g.Name(), SentinelAddrs: g.Addrs(), SentinelPassword: "sentinel-secret"})
	t.Cleanup(func() { rdb.Close() })
	if err := rdb.Set(t.Context(), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// Replication is asynchronous: without WAIT the write could be lost
	// with the master, as production failovers lose them.
	if n, err := rdb.Do(t.Context(), "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT 1: %d replicas, %v", n, err)
	}
	old := g.Master().Addr()
	g.Master().Stop()
	now := g.WaitFailover(old, 30*time.Second)
	if now == old || g.Server(now) == nil {
		t.Fatalf("new master %s", now)
	}
	if v, err := g.Server(now).Client().Get(t.Context(), "k").Result(); err != nil || v != "v" {
		t.Fatalf("replicated key on the new master: %q, %v", v, err)
	}
}

func TestWithACL_restrictedDefaultUserStillAnswersPing(t *testing.T) {
	// The plaintext readiness port works with a restricted default user,
	// and that user can do nothing else.
	srv := redistest.Start(t, redistest.WithACL("default on nopass -@all +ping", "admin on >pw ~* &* +@all"))
	if err := srv.Client().Ping(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Client().Set(t.Context(), "k", "v", 0).Err(); err == nil {
		t.Fatal("the restricted default user could SET")
	}
}
