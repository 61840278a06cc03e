package redisbackend_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/redisbackend"
	"github.com/weirhq/weir/redisbackend/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// base is a realistic unix time in microseconds (November 2023), so PX
// expiry and Lua number handling see values of the real magnitude.
const base = int64(1_700_000_000_000_000_000) // Unix nanoseconds

// us and ms are a microsecond and a millisecond in nanoseconds.
const (
	us = int64(time.Microsecond)
	ms = int64(time.Millisecond)
)

// counter is a go-redis hook counting commands that reach the network.
type counter struct{ n atomic.Int64 }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}
func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// newClient returns a client for srv with a pool of poolSize connections,
// closed at cleanup, and a counter of the commands it sends.
func newClient(t testing.TB, srv *redistest.Server, poolSize int) (*redis.Client, *counter) {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:                  srv.Addr(),
		PoolSize:              poolSize,
		ContextTimeoutEnabled: true,
		DialTimeout:           time.Second,
		ReadTimeout:           time.Second,
		WriteTimeout:          time.Second,
	})
	t.Cleanup(func() { _ = c.Close() })
	cnt := &counter{}
	c.AddHook(cnt)
	return c, cnt
}

func newBackend(t testing.TB, client redis.UniversalClient, timeout time.Duration) *redisbackend.Backend {
	t.Helper()
	cfg := redisbackend.DefaultConfig()
	cfg.Timeout = timeout
	b, err := redisbackend.New(client, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b
}

// startBackend starts a Redis and returns a client of it, a backend over
// that client with a one-second timeout, and the server's time now.
func startBackend(t testing.TB) (*redis.Client, *redisbackend.Backend, int64) {
	t.Helper()
	c, _ := newClient(t, redistest.Start(t), 2)
	b := newBackend(t, c, time.Second)
	now, err := b.Time(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return c, b, now
}

func lim(interval, burst int64) gcra.Limit { return gcra.Limit{Interval: interval, Burst: burst} }

// sameResult compares two results the way they are observable: TATs at or
// before now both mean "rested" (Redis may already have expired the key).
func sameResult(a, b gcra.Result, now int64) bool {
	if a.TAT != b.TAT && (a.TAT > now || b.TAT > now) {
		return false
	}
	a.TAT, b.TAT = 0, 0
	return a == b
}
