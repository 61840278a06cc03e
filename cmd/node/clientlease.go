package main

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/weirhq/weir/clientlease"
	"github.com/weirhq/weir/lease"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/peer"
	"github.com/weirhq/weir/policy"
)

// serveClientLeases registers weir.v1.Leases on the public server: Go
// clients with Config.Leases hold leases through this node, which relays
// each refresh to the keys' owners (leaseRelay) as a peer node's own
// refreshes go. Holders are named after this node and its incarnation.
func (n *node) serveClientLeases(public grpc.ServiceRegistrar, cfg config, lim *limiter.Limiter, ph peer.Handler, reg prometheus.Registerer) error {
	local, ok := ph.(peer.LeaseHandler)
	if !ok {
		return errors.New("client leases: the peer handler grants no leases")
	}
	ccfg := clientlease.DefaultConfig()
	ccfg.Name = cfg.NodeName + "#" + strconv.FormatInt(time.Now().UnixNano(), 36)
	ccfg.RelayTimeout = min(ccfg.RelayTimeout, cfg.ForwardTimeout)
	relay := leaseRelay{owners: n.state.cluster, local: local, remote: n.state.peers}
	svc, err := clientlease.New(ccfg, clientlease.Deps{Relay: relay, Policies: policyOf(lim.Policy), Members: n.state.cluster.Members}, n.logger, reg)
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

// leaseRelay is clientlease.Relay over today's cluster: each item goes to
// its group's owner (cluster.RegionOwner), one refresh per owner, through
// the peer handler (the Validator, then the cluster's HandleLease) for
// groups this node owns and peer.Client.Lease for the others. NotOwner,
// item errors and failed calls answer Busy, as cluster/lease_peer.go
// applies a peer node's own refresh.
type leaseRelay struct {
	owners interface {
		RegionOwner(group string) (addr string, local bool)
	}
	local  peer.LeaseHandler
	remote peer.Leaser
}

// busyAfterError is how soon an item whose owner failed may ask again
// (cluster's lease tick).
const busyAfterError = 10 * time.Millisecond

func (r leaseRelay) Lease(ctx context.Context, holder string, ref lease.Refresh) ([]lease.Answer, error) {
	type batch struct {
		addr  string
		local bool
		idx   []int
		sub   lease.Refresh
	}
	var batches []*batch
	byOwner := map[string]*batch{}
	out := make([]lease.Answer, len(ref.Items))
	for i, it := range ref.Items {
		out[i] = lease.Answer{Outcome: lease.Busy, RetryAfter: busyAfterError.Nanoseconds()}
		addr, local := r.owners.RegionOwner(it.Group)
		if !local && addr == "" {
			continue // the owner's address is not known yet
		}
		k := addr
		if local {
			k = "\x00local"
		}
		b := byOwner[k]
		if b == nil {
			b = &batch{addr: addr, local: local, sub: lease.Refresh{Owner: k, Seq: ref.Seq}}
			byOwner[k] = b
			batches = append(batches, b)
		}
		it.Peer = holder
		b.idx = append(b.idx, i)
		b.sub.Items = append(b.sub.Items, it)
	}
	var wg sync.WaitGroup
	for _, b := range batches {
		wg.Go(func() {
			var got []peer.LeaseAnswer
			var err error
			if b.local {
				got = r.local.HandleLease(ctx, holder, b.sub)
			} else {
				got, err = r.remote.Lease(ctx, b.addr, b.sub)
			}
			for j, i := range b.idx {
				if err == nil && j < len(got) && got[j].Err == nil && got[j].NotOwner == "" {
					out[i] = got[j].Answer
				}
			}
		})
	}
	wg.Wait()
	return out, nil // an owner that did not answer is Busy
}
