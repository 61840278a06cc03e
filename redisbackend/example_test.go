package redisbackend_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/redisbackend"
)

// Example shows one composite decision: a tenant limit and a user limit
// within it, both keys in the tenant's hash tag. It needs a running Redis,
// so it is compiled but not run.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	be, err := redisbackend.New(rdb, redisbackend.DefaultConfig())
	if err != nil {
		panic(err)
	}
	tenant, _ := gcra.PerPeriod(1000, time.Second, 200)
	user, _ := gcra.PerPeriod(50, time.Second, 20)
	d, err := be.Decide(context.Background(),
		[]string{"rl:{tenant42}:all", "rl:{tenant42}:user:7"},
		[]gcra.Limit{tenant, user}, 1, 0)
	if err != nil {
		fmt.Println("redis unavailable, apply the failure policy:", err)
		return
	}
	if !d.Overall.Allowed {
		fmt.Println("429, retry after", gcra.CeilSeconds(d.Overall.RetryAfter), "s")
	}
}
