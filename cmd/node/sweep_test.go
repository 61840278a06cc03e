package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/memstore"
)

// The sweeper must judge "rested" on the TATs' own time base. Here the
// node's wall clock runs 10s ahead of Redis, and a key's TAT is 1s ahead of
// Redis time: its quota is spent, so the key must survive every sweep.
func TestSweep_usesTheTATsTimeBase(t *testing.T) {
	mem := memstore.New(memstore.DefaultConfig())
	redisNow := time.Now().Add(-10 * time.Second).UnixMicro()
	mem.Put("g", "weir:{g}:spent", redisNow+1_000_000)
	mem.Put("g", "weir:{g}:rested", redisNow-1)
	var sweeps atomic.Int32
	counted := func(now int64) int { defer sweeps.Add(1); return mem.Sweep(now) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- sweep(ctx, time.Millisecond, func() int64 { return redisNow }, []func(int64) int{counted})
	}()
	waitFor(t, 5*time.Second, func() bool { return sweeps.Load() >= 3 })
	cancel()
	<-done
	if !mem.Has("g", "weir:{g}:spent") {
		t.Fatal("the sweeper freed a key whose TAT is ahead of the Redis clock")
	}
	if mem.Has("g", "weir:{g}:rested") {
		t.Fatal("the sweeper kept a rested key")
	}
}
