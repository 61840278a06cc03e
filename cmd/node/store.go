package main

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/breaker"
	"github.com/weirhq/weir/forward"
	"github.com/weirhq/weir/leaselink"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/membership"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/owner"
	"github.com/weirhq/weir/peer"
	"github.com/weirhq/weir/redisbackend"
	"github.com/weirhq/weir/redisclock"
	"github.com/weirhq/weir/redisconn"
	"github.com/weirhq/weir/ring"
	"github.com/weirhq/weir/writebehind"
)

// state is what openState builds: the routes (ring and member
// addresses), the owner (this node's groups), the router (the limiter's
// store), the lease holder, the peer client they forward with, and the
// clock every TAT is measured on.
type state struct {
	routes   *forward.Routes
	owner    *owner.Owner
	router   *forward.Router
	leases   *leaselink.Link   // the holder side
	grants   *leaselink.Grants // the grantor side
	peers    *peer.Client
	breakers *breaker.Set
	now      func() time.Time
	mem      *memstore.Store // owner memory, read by /admin/inspect
	ring     *ring.Ring      // the cluster's, published by Topology
	// clock is the Redis time base (nil without Redis); wantGossip says
	// the node joins a cluster, and gossip holds its membership once
	// started. ready (ready.go) reads them.
	clock      *redisclock.Clock
	wantGossip bool
	gossip     atomic.Pointer[membership.Membership]
}

// openPeers builds the node's one peer client: forwards, leases and
// region reports to a node share its connection, with the peer mTLS
// credentials.
func (n *node) openPeers(cfg config, reg prometheus.Registerer) (*peer.Client, error) {
	pcfg := peer.DefaultClientConfig()
	pcfg.LocalName, pcfg.Timeout = cfg.NodeName, cfg.ForwardTimeout
	pcfg.TLS = n.peerClientCredentials(cfg)
	peers, err := peer.NewClient(pcfg, n.logger, reg)
	if err != nil {
		return nil, err
	}
	n.closers = append(n.closers, peers.Close)
	return peers, nil
}

// openState builds owner memory, the optional Redis persistence (backend,
// strict queue, write-behind, Redis clock), the ring and its routes, the
// region link, the owner, the lease holder and the router that ties them
// and the peer client together, in that order: each is built after what
// it reads, so nothing is bound late. A node without --join is a cluster
// of one.
func (n *node) openState(ctx context.Context, cfg config, policies limiter.PolicySource, peers *peer.Client, reg prometheus.Registerer) (*state, error) {
	mem := memstore.New(memstoreConfig(cfg.Bounds))
	registerMemstoreMetrics(mem, reg)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "weir_active_keys",
		Help: "Keys held in owner memory (rested keys are freed by the sweeper).",
	}, func() float64 { return float64(mem.Len()) }))

	st := &state{now: time.Now, mem: mem, wantGossip: cfg.GossipAddr != ""}
	breakers, err := breaker.NewSet(breaker.DefaultConfig(), n.logger, reg)
	if err != nil {
		return nil, err
	}
	st.breakers = breakers
	deps := owner.Deps{Mem: mem, Breakers: breakers}
	if cfg.redisConfigured() {
		b, wb, clock, err := n.openRedis(ctx, cfg, reg)
		if err != nil {
			return nil, err
		}
		if deps.Strict, err = redisbackend.NewStrictQueue(b, cfg.RedisTimeout, maxStrictBatch); err != nil {
			return nil, err
		}
		deps.Redis, deps.WriteBehind = b, wb
		deps.Permits = b // concurrency keys' permit sets, write-through on acquire
		st.now = func() time.Time { return time.Unix(0, clock.Now()) }
		st.clock = clock
	} else {
		n.logger.Info("embedded mode: state in memory only; pass --redis-addr, --redis-url, --redis-cluster or --redis-sentinel to persist it")
	}
	if st.ring, err = ring.New(ring.DefaultConfig()); err != nil {
		return nil, err
	}
	st.routes = forward.NewRoutes(cfg.NodeName, st.ring)
	deps.Ring = st.routes
	st.peers = peers
	if err := n.openRegions(cfg, st.routes, policies, peers, reg); err != nil {
		return nil, err
	}
	deps.Regions = n.regionsDep()
	ocfg := owner.DefaultConfig()
	ocfg.LocalName = cfg.NodeName
	ocfg.LoadTimeout = cfg.RedisTimeout
	ocfg.FreezeLimit = cfg.FreezeLimit
	ocfg.MaxPermitKeys = cfg.Bounds.MaxKeys // --max-keys bounds permit sets as it bounds TATs
	if st.owner, err = owner.New(ocfg, deps, n.logger, reg); err != nil {
		return nil, err
	}
	n.policyOwner.Store(st.owner)
	n.sweepers = append(n.sweepers, st.owner.Sweep) // sweeps mem, remembering what it swept
	if err := n.enableLeases(ctx, cfg, st, reg); err != nil {
		return nil, err
	}
	fcfg := forward.DefaultConfig()
	fcfg.Forward.MaxTimeout = cfg.ForwardTimeout
	fcfg.Forward.MinTimeout = min(fcfg.Forward.MinTimeout, cfg.ForwardTimeout)
	if st.router, err = forward.New(fcfg, forward.Deps{Routes: st.routes, Forwarder: st.peers, Owner: st.owner, Leases: st.leases,
		Breakers: breakers}, n.logger, reg); err != nil {
		return nil, err
	}
	n.goBackground(func() error { return st.router.RunHeartbeat(ctx) })
	return st, nil
}

var _ owner.WriteBehind = (*writebehind.Writer)(nil)

// maxStrictBatch caps the strict decisions in one Redis pipeline.
const maxStrictBatch = 256

// openRedis connects to Redis and starts the write-behind flusher and the
// Redis clock. Redis that is down at start is not fatal: decisions fall back
// by policy until it answers.
func (n *node) openRedis(ctx context.Context, cfg config, reg prometheus.Registerer) (*redisbackend.Backend, *writebehind.Writer, *redisclock.Clock, error) {
	conn, err := redisconn.New(cfg.conn, n.logger)
	if err != nil {
		return nil, nil, nil, err
	}
	n.closers = append(n.closers, conn.Close)
	n.redisConn = conn
	n.goBackground(func() error { return conn.Run(ctx) })
	client := conn.Redis()
	b, err := redisbackend.New(client, redisbackend.Config{Timeout: cfg.RedisTimeout})
	if err != nil {
		return nil, nil, nil, err
	}
	src, err := redisclock.NewClientSource(client) // one pinned server, also on Redis Cluster
	if err != nil {
		return nil, nil, nil, err
	}
	clock, err := redisclock.New(redisclock.DefaultConfig(), src, nil, n.logger, reg) // nil: the local clock is clock.Real()
	if err != nil {
		return nil, nil, nil, err
	}
	syncCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := clock.Sync(syncCtx); err != nil {
		n.logger.Warn("redis not reachable at start; using the local clock until it is", "err", err)
	}
	wb, err := writebehind.New(writebehind.DefaultConfig(), b, clock.Now, n.logger, reg) // both in Unix nanoseconds
	if err != nil {
		return nil, nil, nil, err
	}
	n.goBackground(func() error { return clock.Run(ctx) })
	n.goBackground(func() error { return wb.Run(ctx) })
	n.logger.Info("redis mode: owners decide fast limits in memory and persist TATs write-behind; strict limits run in Redis",
		"redis", conn.String()) // never shows a password
	return b, wb, clock, nil
}

// sweep frees rested in-memory keys every interval until ctx ends. Keys
// are rested when their TAT is at or before now, the time base the TATs
// are written in (the Redis clock when Redis is configured), never the
// ticker's wall-clock time: on a node whose clock runs ahead of Redis that
// would free keys whose quota is still spent, and they would decide as
// rested.
func sweep(ctx context.Context, every time.Duration, now func() int64, sweepers []func(now int64) int) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			at := now()
			for _, s := range sweepers {
				s(at)
			}
		}
	}
}
