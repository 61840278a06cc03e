package main

import (
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/weirhq/weir/clientlease"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/peer"
	"github.com/weirhq/weir/policy"
)

// serveClientLeases registers weir.v1.Leases on the public server: Go
// clients with Config.Leases hold leases through this node, which relays
// each refresh to the keys' owners with the relay RLQS streams use
// (ownerLeases: one refresh per owner, Busy for what an owner could not
// answer). Holders are named after this node and its incarnation.
func (n *node) serveClientLeases(public grpc.ServiceRegistrar, cfg config, lim *limiter.Limiter, ph peer.Handler, reg prometheus.Registerer) error {
	local, ok := ph.(peer.LeaseHandler)
	if !ok {
		return errors.New("client leases: the peer handler grants no leases")
	}
	ccfg := clientlease.DefaultConfig()
	ccfg.Name = cfg.NodeName + "#" + strconv.FormatInt(time.Now().UnixNano(), 36)
	ccfg.RelayTimeout = min(ccfg.RelayTimeout, cfg.ForwardTimeout)
	relay := ownerLeases{owners: n.state.routes, local: local, remote: n.state.peers}
	svc, err := clientlease.New(ccfg, clientlease.Deps{Relay: relay, Policies: policyOf(lim.Policy), Members: n.state.routes.Members}, n.logger, reg)
	if err != nil {
		return err
	}
	clientlease.Register(public, svc)
	n.leasesvc = svc // shutdown ends its streams before the public server drains
	return nil
}

// policyOf adapts a policy getter to clientlease.PolicySource.
type policyOf func() *policy.Policy

func (f policyOf) Current() *policy.Policy { return f() }
