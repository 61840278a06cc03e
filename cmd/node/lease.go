package main

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/cluster"
	"github.com/weirhq/weir/limiter"
)

// enableLeases turns on leasing (cluster/lease.go): the node grants leases
// on the peer plane and spends the ones it holds. Limits opt in through
// the policy (`lease: {max, ttl}`), so without such a limit nothing
// changes. The refresh loop runs until the node stops.
func (n *node) enableLeases(ctx context.Context, cfg config, st *state, policies limiter.PolicySource, reg prometheus.Registerer) error {
	deps := cluster.LeaseDeps{
		Leaser: st.peers, Policies: policies, Now: st.now,
		Incarnation: strconv.FormatInt(time.Now().UnixNano(), 36), // lease numbers restart with the process
	}
	lcfg := cluster.DefaultLeaseConfig()
	// A grant waits for its write-through as a first load waits for Redis;
	// a refresh waits no longer than a forward may.
	lcfg.WriteTimeout, lcfg.RPCTimeout = cfg.RedisTimeout, min(lcfg.RPCTimeout, cfg.ForwardTimeout)
	if err := st.cluster.EnableLeases(lcfg, deps, reg); err != nil {
		return err
	}
	n.goBackground(func() error {
		st.cluster.RunLeases(ctx)
		return nil
	})
	return nil
}
