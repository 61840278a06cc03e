package redisconn_test

import (
	"testing"

	"go.uber.org/goleak"
)

// go-redis's pool, after PoolSize failed dials, redials in the background
// once a second; a client closed meanwhile ends that loop only when it
// next wakes, up to a second after Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}
