package redisclock_test

import (
	"testing"
	"time"

	"github.com/weirhq/weir/redisbackend"
	"github.com/weirhq/weir/redisbackend/redistest"
	"github.com/weirhq/weir/redisclock"
)

func TestClock_Sync_realRedis(t *testing.T) {
	srv := redistest.Start(t)
	be, err := redisbackend.New(srv.Client(), redisbackend.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	c := mustNew(t, redisclock.DefaultConfig(), be, time.Now, nil)
	if err := c.Sync(t.Context()); err != nil {
		t.Fatalf("sync: %v", err)
	}
	const slack = 3_000 // us: the sample's rtt/2 plus scheduling noise under -race
	before := c.Now()
	server, err := be.Time(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	after := c.Now()
	if server < before-slack || server > after+slack {
		t.Errorf("redis TIME %d outside [Now before - %dus, Now after + %dus] = [%d, %d]",
			server, slack, slack, before-slack, after+slack)
	}
}

func TestClock_Sync_pausedRedisKeepsOffset(t *testing.T) {
	srv := redistest.Start(t)
	be, err := redisbackend.New(srv.Client(), redisbackend.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := redisclock.DefaultConfig()
	cfg.Timeout = 20 * time.Millisecond
	c := mustNew(t, cfg, be, time.Now, nil)
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
