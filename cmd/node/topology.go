package main

import (
	"context"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/ring"
	"github.com/weirhq/weir/routing"
)

// topology answers the public Topology RPC from the cluster's ring, the
// members' gossiped public gRPC addresses and the current policy's group
// rules. It is built on every call: an answer is a few kilobytes and the
// RPC is rare (clients refresh on change and every few seconds). Safe for
// concurrent use.
type topology struct {
	n    *node
	ring *ring.Ring
	lim  *limiter.Limiter
}

func (n *node) topology(lim *limiter.Limiter) *topology {
	return &topology{n: n, ring: n.state.ring, lim: lim}
}

// Topology returns false when the ring's hash cannot be published.
func (t *topology) Topology(context.Context) (*weirv1.TopologyResponse, bool) {
	parts, ok := t.ring.Partitions()
	if !ok {
		return nil, false
	}
	p := t.lim.Policy()
	var rules []routing.Rule
	for _, r := range p.GroupRules() {
		rules = append(rules, routing.Rule{Match: r.Match, Group: r.Group})
	}
	return routing.Response(parts, t.publicAddrs(), rules, p.Version), true
}

// Epoch is the ring's; it does not allocate.
func (t *topology) Epoch() uint64 { return t.ring.Epoch() }

// publicAddrs maps member names to their public gRPC addresses: from gossip
// in a cluster, this node's own listener in a cluster of one (a wildcard
// host replaced as in gossip: advertise.go). Peer-plane addresses are
// never included.
func (t *topology) publicAddrs() map[string]string {
	m := t.n.state.gossip.Load()
	if m == nil {
		return map[string]string{t.n.name: t.n.grpcAddr()}
	}
	members := m.Members()
	out := make(map[string]string, len(members))
	for _, mem := range members {
		out[mem.Name] = mem.GRPCAddr
	}
	return out
}
