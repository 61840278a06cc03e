package main

import (
	"context"
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/weirhq/weir/lease"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/peer"
	"github.com/weirhq/weir/rlqs"
)

// registerRLQS serves Envoy's RLQS (package rlqs) on the public gRPC
// server: its streams take leases through ownerLeases, as holders of
// their own, from the keys' owners.
func (n *node) registerRLQS(public grpc.ServiceRegistrar, lim *limiter.Limiter, ph peer.Handler, reg prometheus.Registerer) error {
	local, ok := ph.(peer.LeaseHandler)
	if !ok {
		return errors.New("rlqs: the peer handler grants no leases")
	}
	cfg := rlqs.DefaultConfig()
	cfg.NodeName = n.name
	l := ownerLeases{owners: n.state.routes, local: local, remote: n.state.peers}
	srv, err := rlqs.New(cfg, l, lim, n.logger, reg)
	if err != nil {
		return err
	}
	rlqs.Register(public, srv)
	n.rlqs = srv // shutdown ends its streams before the public server drains
	return nil
}

// ownerLeases is the one relay for lease holders outside the cluster
// (rlqs.Leases for Envoy streams, clientlease's relay for Go clients):
// each item goes to its group's owner, the node's own peer handler (the
// intake Validator over the owner's grants) for local groups and the peer
// client for the others, one refresh per owner. What an owner could not
// answer (not the owner, an error, no address yet) comes back Busy, as a
// peer node's refresh does (leaselink): the holder asks again after a tick.
type ownerLeases struct {
	owners interface {
		RegionOwner(group string) (addr string, local bool)
	}
	local  peer.LeaseHandler
	remote peer.Leaser
}

func (l ownerLeases) Lease(ctx context.Context, holder string, r lease.Refresh) ([]lease.Answer, error) {
	out := make([]lease.Answer, len(r.Items))
	byOwner := map[string][]int{} // owner address ("" here) -> items
	for i := range r.Items {
		r.Items[i].Peer = holder
		addr, local := l.owners.RegionOwner(r.Items[i].Group)
		switch {
		case local:
			byOwner[""] = append(byOwner[""], i)
		case addr == "":
			out[i] = lease.Answer{Outcome: lease.Busy}
		default:
			byOwner[addr] = append(byOwner[addr], i)
		}
	}
	var wg sync.WaitGroup
	for addr, idx := range byOwner {
		wg.Go(func() {
			sub := lease.Refresh{Owner: addr, Seq: r.Seq, Items: make([]lease.Request, len(idx))}
			for j, i := range idx {
				sub.Items[j] = r.Items[i]
			}
			var answers []peer.LeaseAnswer
			var err error
			if addr == "" {
				answers = l.local.HandleLease(ctx, holder, sub)
			} else {
				answers, err = l.remote.Lease(ctx, addr, sub)
			}
			for j, i := range idx {
				out[i] = lease.Answer{Outcome: lease.Busy}
				if err == nil && j < len(answers) && answers[j].NotOwner == "" && answers[j].Err == nil {
					out[i] = answers[j].Answer
				}
			}
		})
	}
	wg.Wait()
	return out, nil
}
