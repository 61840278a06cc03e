package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/weirhq/weir/client"
	"github.com/weirhq/weir/limitkey"
)

// routeWait bounds how long a routing client may take to read its first
// topology.
const routeWait = 10 * time.Second

// routedDecider asks weir.v1 Decide through weir's own Go client with owner
// routing (client.Config.Route): each request goes straight to its group's
// owner.
type routedDecider struct{ c *client.Client }

var _ decider = routedDecider{}

func (d routedDecider) decide(ctx context.Context, key string) (bool, error) {
	resp, err := d.c.Decide(ctx, map[string]string{rlsKey: key}, 1)
	if err != nil {
		return false, err
	}
	if !resp.GetMatched() {
		return false, fmt.Errorf("weir.v1: no limit matched {%s: %s}", rlsKey, key)
	}
	return resp.GetAllowed(), nil
}

// dialRouted opens cfg.conns routing clients per node (client.Config.Route,
// no batching, the bench's per-decision timeout), client j's Target being
// node j mod n, and waits until each has read the cluster's topology.
// Every client keeps one connection per member.
func dialRouted(ctx context.Context, st started, bench config) ([]decider, func(), error) {
	var cs []*client.Client
	closeAll := func() {
		for _, c := range cs {
			_ = c.Close()
		}
	}
	var ds []decider
	for range bench.conns {
		for _, a := range st.addrs {
			cfg := client.DefaultConfig()
			cfg.Target, cfg.Route, cfg.Timeout = a, true, bench.load.timeout
			c, err := client.New(cfg)
			if err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("peers: routing client for %s: %w", a, err)
			}
			cs = append(cs, c)
			ds = append(ds, routedDecider{c})
		}
	}
	if err := awaitRoutes(ctx, cs); err != nil {
		closeAll()
		return nil, nil, err
	}
	return ds, closeAll, nil
}

// awaitRoutes polls each client's route epoch until it has a topology or
// routeWait passes.
func awaitRoutes(ctx context.Context, cs []*client.Client) error {
	ctx, cancel := context.WithTimeout(ctx, routeWait)
	defer cancel()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for _, c := range cs {
		for c.RouteEpoch() == 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("peers: routing client: no topology within %v", routeWait)
			case <-tick.C:
			}
		}
	}
	return nil
}

// leasedLoad is the leasable hot key: one key of weir's leasable limit,
// every worker on one node.
var leasedLoad = workload{name: "leasable hot key", keys: 1, limit: leasedLimit}

// leasedKey is the storage key of leasedLoad's one key ("key-0").
var leasedKey = limitkey.Key("key-0", leasedLimitName, "key-0")

// leasedRow names the k-th row of the leased table: k = 0 the owner, then
// the non-owners in node order.
func leasedRow(k int) string {
	if k == 0 {
		return leasedLoad.name + " via the owner"
	}
	return fmt.Sprintf("%s via non-owner %d", leasedLoad.name, k)
}

// measureLeased drives leasedLoad through each node of st in turn (all
// workers on conns connections to that node), then asks the nodes which
// owns the key, and returns the owner's run first.
func measureLeased(ctx context.Context, cfg config, st started, newMeter func() *meter) ([]measured, error) {
	rs := make([]result, len(st.addrs))
	for i, addr := range st.addrs {
		ds, closeAll, err := dialEach(newLeasedDecider)(ctx, started{addrs: []string{addr}}, cfg)
		if err != nil {
			return nil, err
		}
		m := newMeter()
		r := runLoad(ctx, cfg.load, leasedLoad, ds, m)
		closeAll()
		if err := settle(ctx, leasedLoad, &r, m); err != nil {
			return nil, fmt.Errorf("via %s: %w", st.names[i], err)
		}
		r.node = st.names[i]
		rs[i] = r
	}
	owner, err := findOwner(ctx, st.admin, leasedKey)
	if err != nil {
		return nil, err
	}
	out := []measured{{leasedRow(0), rs[owner]}}
	for i, r := range rs {
		if i != owner {
			out = append(out, measured{leasedRow(len(out)), r})
		}
	}
	return out, nil
}

// findOwner returns the index of the one admin address whose node holds
// key in owner memory (/admin/inspect).
func findOwner(ctx context.Context, admins []string, key string) (int, error) {
	owner := -1
	for i, a := range admins {
		var ks []struct {
			Held  bool   `json:"held"`
			Error string `json:"error"`
		}
		if err := httpGet(ctx, "http://"+a+"/admin/inspect?"+url.Values{"key": {key}}.Encode(), &ks); err != nil {
			return -1, fmt.Errorf("peers: inspect %s: %w", key, err)
		}
		if len(ks) != 1 || ks[0].Error != "" {
			return -1, fmt.Errorf("peers: inspect %s at %s: %+v", key, a, ks)
		}
		if ks[0].Held {
			if owner >= 0 {
				return -1, fmt.Errorf("peers: %s held by two nodes (%s, %s)", key, admins[owner], a)
			}
			owner = i
		}
	}
	if owner < 0 {
		return -1, errors.New("peers: no node holds " + key)
	}
	return owner, nil
}
