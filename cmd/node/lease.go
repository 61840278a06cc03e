package main

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/leaselink"
)

// enableLeases turns on leasing: the node grants leases as an owner on the
// peer plane (leaselink.Grants, over the owner's state machine) and spends
// the ones it holds (leaselink.Link). Limits opt in through the policy (`lease: {max, ttl}`), so
// without such a limit nothing changes. The refresh loop runs until the
// node stops. Both sides are timed on the TATs' time base.
func (n *node) enableLeases(ctx context.Context, cfg config, st *state, reg prometheus.Registerer) error {
	// Lease numbers restart with the process.
	name := cfg.NodeName + "#" + strconv.FormatInt(time.Now().UnixNano(), 36)
	base := timeBase{st.now}
	gcfg := leaselink.DefaultGrantConfig()
	gcfg.Grantor.Name, gcfg.WriteTimeout = name, cfg.RedisTimeout
	var err error
	if st.grants, err = leaselink.NewGrants(gcfg, st.owner, base, reg); err != nil {
		return err
	}
	st.owner.EnableLeases(st.grants)
	hcfg := leaselink.DefaultConfig()
	hcfg.LocalName, hcfg.Holder.Name = cfg.NodeName, name
	// A refresh waits no longer than a forward may.
	hcfg.RPCTimeout = min(hcfg.RPCTimeout, cfg.ForwardTimeout)
	st.leases, err = leaselink.New(hcfg, leaselink.Deps{Leaser: st.peers, Routes: st.routes, Grants: st.grants, Breakers: st.breakers, Clock: base}, n.logger, reg)
	if err != nil {
		return err
	}
	n.goBackground(func() error {
		st.leases.Run(ctx)
		return nil
	})
	return nil
}

// timeBase is the node's TAT time base (the Redis clock, or the wall
// clock without Redis) as a clock.Clock: Now reads it, durations and
// timers are the real clock's.
type timeBase struct{ now func() time.Time }

var _ clock.Clock = timeBase{}

func (b timeBase) Now() time.Time                       { return b.now() }
func (b timeBase) Since(t time.Time) time.Duration      { return b.now().Sub(t) }
func (timeBase) NewTimer(d time.Duration) clock.Timer   { return clock.Real().NewTimer(d) }
func (timeBase) NewTicker(d time.Duration) clock.Ticker { return clock.Real().NewTicker(d) }
