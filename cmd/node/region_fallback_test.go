package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/forward"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/intake"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/limitkey"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/owner"
	"github.com/weirhq/weir/peer/peertest"
	"github.com/weirhq/weir/policy"
	"github.com/weirhq/weir/region"
	"github.com/weirhq/weir/regionlink"
	"github.com/weirhq/weir/ring"
)

const fallbackGlobalPolicy = `
version: region-fallback
limits:
  - {name: world, match: [tenant], rate: 100/s, burst: 20, scope: global}
`

// worldLimit is fallbackGlobalPolicy's limit: 100/s, burst 20.
var worldLimit = gcra.Limit{Interval: 10_000_000, Burst: 20}

// fakeNow is the one settable clock of an in-process test.
type fakeNow struct {
	mu sync.Mutex
	ns int64
}

func (c *fakeNow) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return time.Unix(0, c.ns) }
func (c *fakeNow) add(d time.Duration) {
	c.mu.Lock()
	c.ns += int64(d)
	c.mu.Unlock()
}

// cutOffSender is a regionlink.Sender that never reaches another region,
// so every region holds its floor of every global key.
type cutOffSender struct{}

func (cutOffSender) Send(context.Context, string, region.Report, bool) (region.Reply, error) {
	return region.Reply{}, errors.New("region link down")
}

// fallbackRegion is one region's cluster of in-process nodes on its own
// network, each with a region link built as the node builds it and a
// limiter wired as the node wires it (withPart: regionFallback).
type fallbackRegion struct {
	net   *peertest.Network
	lims  map[string]*limiter.Limiter
	nodes map[string]*forward.Router
	// routes are the nodes' ring views: RegionOwner says who owns a group
	routes map[string]*forward.Routes
}

func newFallbackRegion(t *testing.T, name, other string, size int, clk *fakeNow, pol *policy.Policy, withPart bool) *fallbackRegion {
	t.Helper()
	r := &fallbackRegion{net: peertest.NewNetwork(), lims: map[string]*limiter.Limiter{}, nodes: map[string]*forward.Router{}, routes: map[string]*forward.Routes{}}
	members := map[string]string{}
	flags := regions{RegionPeers: map[string]string{other: other + "-0"}, RegionFloor: 0.1,
		RegionInterval: 500 * time.Millisecond, RegionTTL: 4 * time.Second}
	for i := range size {
		node := fmt.Sprintf("%s-%d", name, i)
		lcfg, on, err := flags.linkConfig(name, node)
		if err != nil || !on {
			t.Fatalf("link config: %v %v", on, err)
		}
		rg, err := ring.New(ring.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		routes := forward.NewRoutes(node, rg)
		link, err := regionlink.New(lcfg, regionlink.Deps{Owners: routes, Sender: cutOffSender{},
			LimitName: limitName, Group: limitkey.Group}, nil, prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		ocfg := owner.DefaultConfig()
		ocfg.LocalName = node
		o, err := owner.New(ocfg, owner.Deps{Ring: routes, Mem: memstore.New(memstore.DefaultConfig()), Regions: link}, nil, prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		c, err := forward.New(forward.DefaultConfig(), forward.Deps{Routes: routes, Forwarder: r.net.Forwarder(node), Owner: o}, nil, prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		// The owner sees forwarded work through the Validator, as on the
		// node's peer server: it fills the keys' limit identities.
		v, err := intake.NewValidator(intake.DefaultValidatorConfig(), o, policy.Static(pol), func() int64 { return clk.Now().UnixNano() }, nil)
		if err != nil {
			t.Fatal(err)
		}
		opts := []limiter.Option{limiter.WithClock(clk.Now), limiter.WithMembers(c.Members)}
		if withPart {
			opts = append(opts, regionFallback(link))
		}
		if r.lims[node], err = limiter.New(limiter.DefaultConfig(), policy.Static(pol), c, nil, prometheus.NewRegistry(), opts...); err != nil {
			t.Fatal(err)
		}
		r.net.Register(node, v)
		r.nodes[node] = c
		r.routes[node] = routes
		members[node] = node // the in-memory network addresses nodes by name
	}
	for _, c := range r.nodes {
		c.SetMembers(context.Background(), members)
	}
	return r
}

// killOwner takes group's owner off the network without telling the
// others (a crash not yet noticed) and returns the nodes left.
func (r *fallbackRegion) killOwner(t *testing.T, group string) []*limiter.Limiter {
	t.Helper()
	var left []*limiter.Limiter
	for name := range r.nodes {
		if _, local := r.routes[name].RegionOwner(group); local {
			r.net.Unregister(name)
			continue
		}
		left = append(left, r.lims[name])
	}
	if len(left) != len(r.nodes)-1 {
		t.Fatalf("%d nodes left of %d: want one owner", len(left), len(r.nodes))
	}
	return left
}

// offerDuringOutage has every node left in both regions ask for one unit
// of tenant acme's global limit every millisecond for 2 s while each
// region's owner of acme is dead, and returns the admissions (at, units).
func offerDuringOutage(t *testing.T, withPart bool) []admitted {
	pol, err := policy.Parse("fallback.yaml", []byte(fallbackGlobalPolicy))
	if err != nil {
		t.Fatal(err)
	}
	clk := &fakeNow{ns: 1_700_000_000_000_000_000}
	eu := newFallbackRegion(t, "eu", "us", 3, clk, pol, withPart)
	us := newFallbackRegion(t, "us", "eu", 3, clk, pol, withPart)
	lims := append(eu.killOwner(t, "acme"), us.killOwner(t, "acme")...)
	var out []admitted
	for range 2000 {
		for _, lim := range lims {
			d, err := lim.Decide(context.Background(), limiter.Request{Descriptors: map[string]string{"tenant": "acme"}, Cost: 1})
			if err != nil {
				t.Fatal(err)
			}
			if d.Fallback == nil || d.Fallback.Mode != "local" || d.Fallback.Reason != "owner_unreachable" {
				t.Fatalf("a decision with the owner dead: fallback %+v, want local/owner_unreachable", d.Fallback)
			}
			if d.Allowed {
				out = append(out, admitted{at: clk.Now().UnixNano(), units: 1})
			}
		}
		clk.add(time.Millisecond)
	}
	return out
}

type admitted struct{ at, units int64 }

// overBound returns a window in which adm exceeds l's bound B + W/T
// (checked exactly, multiplied through by T), or ok false.
func overBound(l gcra.Limit, adm []admitted) (units, window int64, over bool) {
	for i := range adm {
		var sum int64
		for j := i; j < len(adm); j++ {
			sum += adm[j].units
			if w := adm[j].at - adm[i].at; sum*l.Interval > l.Span()+w {
				return sum, w, true
			}
		}
	}
	return 0, 0, false
}

// TestRegions_fallbackOfAGlobalLimitStaysWithinTheGlobalBound: two regions
// of three nodes, each region's owner of a global key dead, every other
// node deciding by its failure policy (on_failure: local). Each node falls
// back to its third of its region's floor, so both regions together admit
// within G·W + B. Without the fallback part each node would fall back to a
// third of the whole limit, each region to all of it: twice the bound.
func TestRegions_fallbackOfAGlobalLimitStaysWithinTheGlobalBound(t *testing.T) {
	adm := offerDuringOutage(t, true)
	if units, w, over := overBound(worldLimit, adm); over {
		t.Fatalf("%d units admitted by fallback in %s across both regions: over B + W/T", units, time.Duration(w))
	}
	// Each of 4 nodes: a third of a 10% floor (10/s, burst 2) is one unit,
	// then one per 300ms: 7 in 2 s.
	if len(adm) != 4*7 {
		t.Fatalf("%d units admitted by fallback in 2 s, want 28: 7 on each of 4 nodes", len(adm))
	}
	without := offerDuringOutage(t, false)
	units, w, over := overBound(worldLimit, without)
	if !over {
		t.Fatalf("without the fallback part the regions stayed within the bound (%d admitted): the test shows nothing", len(without))
	}
	t.Logf("admitted in 2 s: %d with the fallback part; %d without it, first over B + W/T with %d units in %s",
		len(adm), len(without), units, time.Duration(w))
}
