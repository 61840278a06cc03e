package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/membership"
)

// joinCluster starts gossip when --gossip-addr or --join is set and keeps
// the cluster's ring in step with membership. Without them the node is a
// cluster of one and owns every group.
func (n *node) joinCluster(ctx context.Context, cfg config, reg prometheus.Registerer) error {
	self := map[string]string{cfg.NodeName: n.peerAddr()}
	if cfg.GossipAddr == "" {
		n.state.router.SetMembers(ctx, self)
		n.ringChanged()
		return nil
	}
	mcfg := membership.DefaultConfig()
	mcfg.NodeName, mcfg.BindAddr = cfg.NodeName, cfg.GossipAddr
	// An explicit advertise address, so that memberlist never advertises
	// a wildcard (it would for [::]) and gossip, forwarding and Topology
	// all name the same host (advertise.go).
	mcfg.AdvertiseAddr = cmp.Or(cfg.AdvertiseAddr, advertised(cfg.GossipAddr, n.advHost))
	mcfg.Join, mcfg.Region = cfg.Join, cfg.Region
	mcfg.GRPCAddr, mcfg.PeerAddr = gossipedGRPC(n.grpcAddr(), mcfg.AdvertiseAddr), n.peerAddr()
	if mcfg.GRPCAddr == "" {
		n.logger.Warn("the public gRPC listener is on loopback while gossip is not: the Topology RPC names no address for this node, so routing clients reach its groups through other nodes; bind --grpc-addr to an address clients can reach", "grpc", n.grpcAddr())
	}
	keys, err := cfg.gossipKeys()
	if err != nil {
		return err
	}
	if len(keys) > 0 {
		mcfg.SecretKey, mcfg.SecondaryKeys = keys[0], keys[1:]
	}
	m, err := membership.Start(ctx, mcfg, n.logger, reg)
	if err != nil {
		return fmt.Errorf("gossip: %w", err)
	}
	n.members = m
	n.state.gossip.Store(m)
	n.applyMembers(ctx)
	n.goBackground(func() error {
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-m.Changes():
				n.applyMembers(ctx)
			}
		}
	})
	n.logger.Info("gossip started", "node", cfg.NodeName, "gossip", m.GossipAddr(), "join", cfg.Join, "encrypted", len(keys) > 0,
		"peer", mcfg.PeerAddr, "grpc", mcfg.GRPCAddr)
	return nil
}

// reloadGossipKeys re-reads --gossip-key-file (on SIGHUP) and installs its
// keys: the first encrypts, the others are accepted. A file that does not
// load changes nothing.
func (n *node) reloadGossipKeys(cfg config) {
	if n.members == nil || cfg.GossipKeyFile == "" {
		return
	}
	keys, err := cfg.gossipKeys()
	if err == nil {
		err = n.members.SetKeys(keys[0], keys[1:])
	}
	if err != nil {
		n.logger.Warn("gossip key reload on SIGHUP rejected; the previous keys stay in use", "err", err)
		return
	}
	n.logger.Info("gossip keys reloaded", "keys", len(keys))
}

// applyMembers rebuilds the ring from the live members and forgets the
// connections of members that left. It tells the cluster which members
// failed rather than left, so it can recognise a healed split.
func (n *node) applyMembers(ctx context.Context) {
	live := map[string]string{}
	for _, mem := range n.members.Members() {
		if mem.PeerAddr != "" { // a node that gossips none cannot be forwarded to
			live[mem.Name] = mem.PeerAddr
		}
	}
	n.mu.Lock()
	for name, addr := range n.mu.peers {
		if live[name] != addr {
			n.state.peers.Forget(addr)
			n.state.breakers.Forget(addr)
		}
	}
	changed := !maps.Equal(n.mu.peers, live)
	n.mu.peers = live
	n.mu.Unlock()
	n.state.router.SetMembersFailed(ctx, live, n.members.Failed())
	if !n.members.Joined() {
		// Seeds given, none answered yet: this ring of the members seen so
		// far may own groups the cluster decides. No key rests on it.
		n.state.owner.OwnershipUnsure()
	}
	if changed {
		n.ringChanged()
	}
}

// leaveCluster hands this node's groups off: every pending TAT goes to
// Redis, then the node leaves gossip so the others take its groups over and
// load their TATs.
func (n *node) leaveCluster(ctx context.Context) {
	if n.state == nil {
		return
	}
	n.state.router.Handoff(ctx)
	if n.members == nil {
		return
	}
	if err := n.members.Leave(ctx); err != nil {
		n.logger.Warn("gossip leave", "err", err)
	}
	if err := n.members.Shutdown(); err != nil {
		n.logger.Warn("gossip shutdown", "err", err)
	}
}
