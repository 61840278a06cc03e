package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/redisbackend"
)

// openStore returns the Redis store when Redis is configured, otherwise the
// in-memory store with its sweeper.
func (n *node) openStore(ctx context.Context, cfg config, reg prometheus.Registerer) (limiter.Store, error) {
	if cfg.RedisAddr == "" && len(cfg.RedisCluster) == 0 {
		mem := memstore.New(memstore.DefaultConfig())
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "weir_active_keys",
			Help: "Keys held in memory (rested keys are freed by the sweeper).",
		}, func() float64 { return float64(mem.Len()) }))
		n.sweepers = append(n.sweepers, mem.Sweep)
		n.logger.Info("embedded mode: state in memory only; pass --redis-addr to persist it")
		return limiter.MemoryStore(mem), nil
	}
	client := newRedisClient(cfg)
	n.closers = append(n.closers, client.Close)
	pingCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := client.Ping(pingCtx).Err(); err != nil {
		// Keep going: Redis may come up after the node. Decisions fail
		// until it does.
		n.logger.Warn("redis not reachable at start", "err", err)
	}
	b, err := redisbackend.New(client, redisbackend.Config{Timeout: cfg.RedisTimeout})
	if err != nil {
		return nil, err
	}
	n.logger.Info("redis mode: every decision runs the GCRA script in Redis", "redis", cfg.RedisAddr, "cluster", cfg.RedisCluster)
	return redisStore{b}, nil
}

func newRedisClient(cfg config) redis.UniversalClient {
	addrs := cfg.RedisCluster
	if cfg.RedisAddr != "" {
		addrs = []string{cfg.RedisAddr}
	}
	return redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:                 addrs,
		IsClusterMode:         len(cfg.RedisCluster) > 0,
		DialTimeout:           max(cfg.RedisTimeout, 100*time.Millisecond),
		ReadTimeout:           cfg.RedisTimeout,
		WriteTimeout:          cfg.RedisTimeout,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1, // a retry would overrun the caller's deadline
	})
}

// sweep frees rested in-memory keys every interval until ctx ends.
func sweep(ctx context.Context, every time.Duration, sweepers []func(now int64) int) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case now := <-t.C:
			for _, s := range sweepers {
				s(now.UnixMicro())
			}
		}
	}
}

// redisStore adapts redisbackend to limiter.Store. The script reads the
// Redis server's clock, so the node's stamp is not sent.
type redisStore struct{ b *redisbackend.Backend }

func (s redisStore) Decide(ctx context.Context, r *limiter.StoreRequest, out []gcra.Result) (gcra.Result, error) {
	d, err := s.b.Decide(ctx, r.Keys, r.Limits, r.Cost, 0)
	if err != nil {
		if errors.Is(err, redisbackend.ErrCrossSlot) || ctx.Err() != nil {
			return gcra.Result{}, fmt.Errorf("redis: %w", err)
		}
		return gcra.Result{}, &limiter.UnavailableError{Reason: "redis_unavailable", Err: err}
	}
	copy(out, d.Results)
	return d.Overall, nil
}

var _ limiter.Store = redisStore{}
