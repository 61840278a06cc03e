package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/redisbackend/redistest"
)

// startRegionNodes starts one node and one redis-server per region, with
// nothing but the flags docs/operations.md asks for ("Global limits across
// regions"): --region, --region-peers and the policy. Every other region
// flag is its default (two flags of the node's fault handling are set:
// see below). The regions reach each other through relays, since
// a node's peer address is known only once it runs.
func startRegionNodes(t *testing.T, policyYAML string, names ...string) []*proc {
	t.Helper()
	policyPath := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policyPath, []byte(policyYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	relays := make(map[string]*relay, len(names))
	for _, n := range names {
		relays[n] = newRelay(t)
	}
	nodes := make([]*proc, len(names))
	for i, name := range names {
		var peers []string
		for _, o := range names {
			if o != name {
				peers = append(peers, o+"="+relays[o].addr())
			}
		}
		nodes[i] = startProc(t, name, "WEIR_POLICY="+policyPath, "WEIR_REDIS_ADDR="+redistest.Start(t).Addr(),
			"WEIR_REGION="+name, "WEIR_REGION_PEERS="+strings.Join(peers, ","),
			// Not region flags: as in the other process tests, a node
			// descheduled for a second under -race on a loaded machine
			// must not reload its state or trip its Redis breaker and
			// answer from its fallback; this test judges the shares.
			"WEIR_FREEZE_LIMIT=1m", "WEIR_REDIS_TIMEOUT=1s")
		relays[name].target.Store(peerRE.FindStringSubmatch(nodes[i].out.String())[1])
	}
	return nodes
}

// sample is one decision a loader made: when it was sent, how long it took
// to answer, its cost and whether it passed.
type sample struct {
	at, took time.Duration
	cost     int64
	allowed  bool
}

// loader offers one descriptor to one node at a fixed request rate until
// stopped, recording every decision (times from a shared origin).
type loader struct {
	mu      sync.Mutex
	samples []sample
}

func (l *loader) run(t *testing.T, node *proc, desc map[string]string, cost int64, every time.Duration, origin time.Time, stop <-chan struct{}) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	// Up to 16 requests in flight, so that a slow answer does not lower
	// the rate offered, and an overloaded node is not flooded either.
	slots := make(chan struct{}, 16)
	var inflight sync.WaitGroup
	defer inflight.Wait()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		select {
		case slots <- struct{}{}:
		default:
			continue // 16 in flight: the node is behind
		}
		inflight.Go(func() {
			defer func() { <-slots }()
			l.decide(t, node, desc, cost, origin)
		})
	}
}

// paced offers desc as a client that honours retry_after does: after a
// denial it waits what the answer says (at most a second), after an
// admission it asks again at once. It keeps a burst of one unit busy
// with two requests per unit, where a fixed rate wastes the time from a
// refill to the next request.
func (l *loader) paced(t *testing.T, node *proc, desc map[string]string, origin time.Time, stop <-chan struct{}) {
	wait := time.NewTimer(0)
	defer wait.Stop()
	for {
		select {
		case <-stop:
			return
		case <-wait.C:
		}
		r, ok := l.decide(t, node, desc, 1, origin)
		if !ok {
			return
		}
		wait.Reset(min(time.Second, r.GetRetryAfter().AsDuration()))
	}
}

func (l *loader) decide(t *testing.T, node *proc, desc map[string]string, cost int64, origin time.Time) (*weirv1.DecideResponse, bool) {
	sent := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	r, err := node.client.Decide(ctx, &weirv1.DecideRequest{Descriptors: desc, Cost: new(cost)})
	cancel()
	if err != nil {
		t.Errorf("decide on %s: %v", node.name, err)
		return nil, false
	}
	l.mu.Lock()
	l.samples = append(l.samples, sample{at: sent.Sub(origin), took: time.Since(sent), cost: cost, allowed: r.Allowed})
	l.mu.Unlock()
	return r, true
}

// window returns the units offered and admitted among the decisions sent
// in [from, to), and the longest any of them took to answer: their
// admissions all happened in [from, to + that).
func (l *loader) window(from, to time.Duration) (offered, units int64, slowest time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.samples {
		if s.at >= from && s.at < to {
			slowest = max(slowest, s.took)
			offered += s.cost
			if s.allowed {
				units += s.cost
			}
		}
	}
	return offered, units, slowest
}

// regionCell is one global limit of the process test, with what each
// busy region offers: cost-sized requests at a multiple of the limit.
type regionCell struct {
	name  string
	rate  float64 // per second
	burst int64
	cost  int64
	// offer is what each busy region asks for, as a multiple of the
	// whole rate: above any share it can hold. 0: a client that honours
	// retry_after (loader.paced), for limits whose regions hold a burst
	// of one unit.
	offer float64
	// low: held to the bound and to half of it only (see the test's
	// comment), not to 0.9 of it.
	low bool
}

func (c regionCell) policy() string {
	return fmt.Sprintf("  - {name: %s, match: [%s], group: %s, rate: %g/s, burst: %d, scope: global}\n", c.name, c.name, c.name, c.rate, c.burst)
}

func (c regionCell) every() time.Duration {
	return time.Duration(float64(time.Second) * float64(c.cost) / (c.offer * c.rate))
}

// TestRegions_process_defaultFlagsAdmitWithinTheBound runs two and three
// regions, one node and one redis-server each, with the default region
// flags, and four global limits at once (each its own descriptor): 100/s
// burst 20 in requests of cost 2, 100/s burst 10 (the limit the defaults admitted nothing of: a
// floor of 2 % of 10 units rounded to none, and a share that admitted
// nothing never reported its demand), 1,000/s burst 100 in requests of
// cost 20, and 5/s burst 1. Every region asks for more than it can hold;
// once the homes' start-up quiet period (TTL) and a few intervals have
// passed, all regions together admit at most G·W + B and at least
// 0.9 × (G·W + B) in an 8s window (G·W is 40 to 80 times B, so a bucket
// drained when the window opens costs little). Then one region alone asks,
// and after 4s gets at least 0.9 × (G·W + B) by itself. (If a loaded
// machine keeps the loaders from offering that much, 0.9 of what they
// offered.)
//
// Burst 1 is held by one region at a time, and a region holding one unit
// loses the time from its refill to the next request it sees, which
// scheduling delays under -race on a loaded machine stretch (0.85 to 0.95
// of the bound in runs here): it is held to the bound and to half of it,
// and region/sim's matrix holds every burst from 1 to 100 to 0.9 over
// longer windows.
func TestRegions_process_defaultFlagsAdmitWithinTheBound(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes and redis-servers")
	}
	for _, names := range [][]string{{"eu", "us"}, {"eu", "us", "ap"}} {
		t.Run(fmt.Sprintf("%d-regions", len(names)), func(t *testing.T) {
			t.Parallel()
			cells := []regionCell{
				{name: "b1", rate: 5, burst: 1, cost: 1, offer: 10, low: true},
				{name: "b20", rate: 100, burst: 20, cost: 2, offer: 1.1},
				{name: "b10", rate: 100, burst: 10, cost: 1, offer: 1.1},
				{name: "b100", rate: 1000, burst: 100, cost: 20, offer: 1.1},
			}
			yaml := "version: defaults\nlimits:\n"
			for _, c := range cells {
				yaml += c.policy()
			}
			nodes := startRegionNodes(t, yaml, names...)
			runRegionPhases(t, nodes, cells)
		})
	}
}

// runRegionPhases drives cells through nodes: all busy (measured from 8s
// for 8s), then only nodes[1] (measured from 4s later, for 8s).
func runRegionPhases(t *testing.T, nodes []*proc, cells []regionCell) {
	const w = 8 * time.Second
	origin := time.Now()
	loads := make([][]*loader, len(cells)) // [cell][region]
	stops := make([]chan struct{}, len(nodes))
	stop := make([]func(), len(nodes))
	for i := range stops {
		stops[i] = make(chan struct{})
		stop[i] = sync.OnceFunc(func() { close(stops[i]) })
	}
	var wg sync.WaitGroup
	for ci, c := range cells {
		loads[ci] = make([]*loader, len(nodes))
		for ri, n := range nodes {
			l := &loader{}
			loads[ci][ri] = l
			desc := map[string]string{c.name: "t"}
			if c.offer == 0 {
				wg.Go(func() { l.paced(t, n, desc, origin, stops[ri]) })
			} else {
				wg.Go(func() { l.run(t, n, desc, c.cost, c.every(), origin, stops[ri]) })
			}
		}
	}
	defer func() {
		for _, f := range stop {
			f()
		}
		wg.Wait()
	}()
	judge := func(phase string, from time.Duration, busy []int) {
		waitFor(t, from+w+10*time.Second, func() bool { return time.Since(origin) >= from+w })
		for ci, c := range cells {
			var offered, units int64
			var slowest time.Duration
			for _, ri := range busy {
				o, u, s := loads[ci][ri].window(from, from+w)
				offered, units, slowest = offered+o, units+u, max(slowest, s)
			}
			// The requests sent in the window were decided within the
			// slowest answer of it: their decisions span a window of the
			// nodes' of between W − slowest and W + slowest. So at most
			// G·(W + slowest) + B, and at least 0.9 × (G·(W − slowest) + B),
			// or of what was asked if a loaded machine kept the loaders
			// from asking that much.
			bound := c.rate*(w+slowest).Seconds() + float64(c.burst)
			floor := 0.9 * min(float64(offered), c.rate*(w-slowest).Seconds()+float64(c.burst))
			t.Logf("%s %s (%g/s burst %d): admitted %d of %d units offered in %s (slowest answer %s), bound G·W + B = %.0f: %.3f",
				phase, c.name, c.rate, c.burst, units, offered, w, slowest.Round(time.Millisecond), bound, float64(units)/(c.rate*w.Seconds()+float64(c.burst)))
			if float64(units) > bound {
				t.Errorf("%s %s: admitted %d units, above G·W + B = %.0f", phase, c.name, units, bound)
			}
			if c.low {
				floor = floor / 0.9 / 2
			}
			if float64(units) < floor {
				t.Errorf("%s %s: admitted %d units, below %.0f", phase, c.name, units, floor)
			}
		}
	}
	all := make([]int, len(nodes))
	for i := range all {
		all[i] = i
	}
	judge("all busy", 8*time.Second, all)
	idleAt := time.Since(origin)
	for i, f := range stop {
		if i != 1 {
			f()
		}
	}
	for ci := range cells { // only us: fold the others' loaders out
		for ri := range nodes {
			if ri != 1 {
				loads[ci][ri] = &loader{}
			}
		}
	}
	judge(nodes[1].name+" alone", idleAt+4*time.Second, []int{1})
}

// TestRegions_process_issueSetupAdmits is the setup of the report that
// found the defaults admitting nothing: two regions of one node and one
// redis-server each, default region flags, one global limit of 100/s
// burst 10, one request every 100ms through each region for 8s from a
// cold start. Before, all 80 were denied (the 2 % floor held 0.2 of a
// unit, and a share that admitted nothing never reported its demand).
// Now each region's floor holds one unit (2/s) through the homes'
// start-up quiet period (TTL, 4s), and after it every request passes.
func TestRegions_process_issueSetupAdmits(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes and redis-servers")
	}
	nodes := startRegionNodes(t, "version: issue\nlimits:\n  - {name: glob, match: [tenant, g], group: tenant, rate: 100/s, burst: 10, scope: global}\n", "eu", "us")
	origin := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	loads := make([]*loader, len(nodes))
	for i, n := range nodes {
		loads[i] = &loader{}
		wg.Go(func() {
			loads[i].run(t, n, map[string]string{"tenant": "acme", "g": "x"}, 1, 100*time.Millisecond, origin, stop)
		})
	}
	waitFor(t, 30*time.Second, func() bool { return time.Since(origin) >= 8*time.Second })
	close(stop)
	wg.Wait()
	var all, late, lateSent int64
	for _, l := range loads {
		_, u, _ := l.window(0, 8*time.Second)
		o, v, _ := l.window(5*time.Second, 8*time.Second)
		all, late, lateSent = all+u, late+v, lateSent+o
	}
	t.Logf("admitted %d of %d in 8s; from 5s (past the homes' quiet period) %d of %d", all, len(loads[0].samples)+len(loads[1].samples), late, lateSent)
	if late != lateSent || all == 0 {
		t.Errorf("admitted %d in all, %d of %d from 5s: want every request past the quiet period", all, late, lateSent)
	}
}
