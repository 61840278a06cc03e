package redisbackend_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/redisbackend"
	"github.com/weirhq/weir/redisbackend/redistest"
)

// margin is how far past its deadline a failing call may return: scheduling
// and the race detector, not Redis, account for it.
const margin = 250 * time.Millisecond

var (
	failKeys   = []string{"rl:{fail}:a", "rl:{fail}:b"}
	failLimits = []gcra.Limit{lim(1000, 10), lim(2000, 10)}
)

// within runs f and fails the test if it returns later than limit+margin or
// without an error.
func within(t *testing.T, what string, limit time.Duration, f func() error) {
	t.Helper()
	start := time.Now()
	err := f()
	el := time.Since(start)
	if err == nil {
		t.Errorf("%s: no error", what)
	}
	if el > limit+margin {
		t.Errorf("%s: returned after %s, want within %s+%s (err %v)", what, el, limit, margin, err)
	}
}

// healthyBackend starts a Redis and a backend with the given timeout, and
// checks that it decides while the server is well.
func healthyBackend(t *testing.T, timeout time.Duration) (*redistest.Server, *redisbackend.Backend) {
	t.Helper()
	srv := redistest.Start(t)
	c, _ := newClient(t, srv, 4)
	b := newBackend(t, c, timeout)
	if _, err := b.Decide(t.Context(), failKeys, failLimits, 1, 0); err != nil {
		t.Fatalf("healthy decide: %v", err)
	}
	return srv, b
}

func TestBackend_pausedRedis_failsWithinTimeout(t *testing.T) {
	const timeout = 100 * time.Millisecond
	srv, b := healthyBackend(t, timeout)
	ctx := t.Context()
	srv.Pause()
	within(t, "Decide", timeout, func() error {
		_, err := b.Decide(ctx, failKeys, failLimits, 1, 0)
		return err
	})
	within(t, "DecidePipelined", timeout, func() error {
		_, errs, err := b.DecidePipelined(ctx, []redisbackend.DecideRequest{{Keys: failKeys, Limits: failLimits, Cost: 1}})
		if err != nil && errs[0] == nil {
			t.Error("transport error not reported on the item")
		}
		return err
	})
	within(t, "LoadTATs", timeout, func() error { _, err := b.LoadTATs(ctx, failKeys); return err })
	within(t, "StoreTATs", timeout, func() error {
		return b.StoreTATs(ctx, []redisbackend.TAT{{Key: failKeys[0], TAT: base + 1, Now: base}})
	})
	within(t, "Time", timeout, func() error { _, err := b.Time(ctx); return err })
	// A caller deadline shorter than Config.Timeout wins.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	within(t, "Decide with a short ctx", 20*time.Millisecond, func() error {
		_, err := b.Decide(short, failKeys, failLimits, 1, 0)
		return err
	})
	srv.Resume()
	if _, err := b.Decide(ctx, failKeys, failLimits, 1, 0); err != nil {
		t.Fatalf("decide after resume: %v", err)
	}
}

func TestBackend_killedRedis_failsThenRecovers(t *testing.T) {
	const timeout = 100 * time.Millisecond
	srv, b := healthyBackend(t, timeout)
	ctx := t.Context()
	srv.Stop()
	within(t, "Decide on a dead Redis", timeout, func() error {
		_, err := b.Decide(ctx, failKeys, failLimits, 1, 0)
		return err
	})
	srv.Restart()
	// The new server has no script cached: the pipeline must reload it.
	reqs := []redisbackend.DecideRequest{{Keys: failKeys, Limits: failLimits, Cost: 1}}
	ds, errs, err := b.DecidePipelined(ctx, reqs)
	if err != nil || errs[0] != nil || !ds[0].Overall.Allowed {
		t.Fatalf("pipelined after restart: %v %v %+v", err, errs, ds)
	}
	if _, err := b.Decide(ctx, failKeys, failLimits, 1, 0); err != nil {
		t.Fatalf("decide after restart: %v", err)
	}
	if err := srv.Client().ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Decide(ctx, failKeys, failLimits, 1, 0); err != nil {
		t.Fatalf("decide after SCRIPT FLUSH: %v", err)
	}
}

func TestNew_rejectsUnsafeClient(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	if _, err := redisbackend.New(c, redisbackend.DefaultConfig()); err == nil {
		t.Error("client without ContextTimeoutEnabled accepted")
	}
	c2 := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer c2.Close()
	if _, err := redisbackend.New(c2, redisbackend.Config{}); err == nil {
		t.Error("zero config accepted")
	}
	if _, err := redisbackend.New(nil, redisbackend.DefaultConfig()); err == nil {
		t.Error("nil client accepted")
	}
}
