package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/weirhq/weir/chaos/history"
	"github.com/weirhq/weir/chaos/netlab"
)

// Gray failures: nodes and Redis that are slow, not dead. Every helper
// below returns a heal that undoes everything it started (hogs killed,
// processes resumed, cgroups removed), and the runner calls it on every
// exit path, interrupts included; Lab.Close is the backstop.

const (
	// throttleQuota every throttlePeriod is the CPU a throttled process
	// gets: 5% of one CPU, in the default CFS period, as a container with a
	// tiny CPU limit under load gets.
	throttleQuota  = 5 * time.Millisecond
	throttlePeriod = 100 * time.Millisecond
	// stallEvery and stallFor: every stallEvery the next node in turn is
	// stopped for stallFor (the 60 ms every 200 ms).
	stallEvery = 200 * time.Millisecond
	stallFor   = 60 * time.Millisecond
	// flapEvery is how long a flapping partition stays cut, then healed.
	flapEvery = 2 * time.Second
)

// injectFunc starts a fault on targets and returns how to heal it.
type injectFunc func(ctx context.Context, tb *testbed, targets []*Node) (func(context.Context) error, error)

func grayNemeses() []Nemesis {
	return []Nemesis{
		{
			Name:              "cpu-starve",
			Summary:           "a CPU-bound hog process runs in every node's namespace (three hogs on the machine): every node is slow, none is down",
			FaultAvailability: 0.999,
			Owners:            1,
			targets:           allNodes,
			inject:            hogs,
		},
		{
			Name:              "slow-owner",
			Summary:           "the hot tenant's owner is throttled to 5% of a CPU (cgroup CPU quota 5ms every 100ms); it stays a member",
			FaultAvailability: 0.999,
			// If the throttled owner misses gossip long enough to be
			// declared dead, its successor and it both decide its keys.
			Owners: 2,
			Stale:  true,
			// A node with 5% of a CPU cannot answer the calls sent to it
			// within 250 ms once its peers forward to it too (they wait
			// for a slow owner instead of failing open); those calls are
			// reported apart, every other node's must be answered.
			Starved: true,
			targets: victim,
			inject: func(ctx context.Context, tb *testbed, v []*Node) (func(context.Context) error, error) {
				return throttle(v[0].Proc())
			},
		},
		{
			Name:              "stalls",
			Summary:           "every 200ms the next node in turn is stopped (SIGSTOP) for 60ms, as CFS quotas and GC pauses do",
			FaultAvailability: 0.999,
			Owners:            1,
			targets:           allNodes,
			inject:            stalls,
		},
		{
			Name:              "redis-slow",
			Summary:           "redis-server is throttled to 5% of a CPU (cgroup CPU quota 5ms every 100ms); it stays up",
			FaultAvailability: 0.999,
			Owners:            1,
			targets:           noNodes,
			inject: func(ctx context.Context, tb *testbed, _ []*Node) (func(context.Context) error, error) {
				return throttle(tb.redisP)
			},
		},
		{
			Name:              "flapping-partition",
			Summary:           "the hot tenant's owner is cut off from the other nodes and healed again every 2s",
			FaultAvailability: 0.99,
			Owners:            2,
			Stale:             true,
			targets:           victim,
			inject:            flap,
		},
		{
			Name: "scale-down-up",
			Summary: "four nodes; the hot tenant's owner and one other leave gracefully (SIGTERM), " +
				"then the owner joins again; the fourth stays away",
			// Calls the client still sends to a node that left are not
			// judged (history.NodeLeft); the others must be answered.
			FaultAvailability: 0.999,
			Owners:            2,
			Stale:             true,
			targets:           leavers,
			inject:            scaleDownUp,
		},
	}
}

// hogs starts one CPU-bound process in each target's namespace.
func hogs(ctx context.Context, tb *testbed, targets []*Node) (func(context.Context) error, error) {
	var procs []*netlab.Proc
	heal := func(context.Context) error {
		var errs []error
		for _, p := range procs {
			errs = append(errs, p.Kill())
		}
		return errors.Join(errs...)
	}
	for _, n := range targets {
		p, err := n.Host.Start(n.Host.Command("sh", "-c", "while :; do :; done"), "")
		if err != nil {
			return heal, fmt.Errorf("start a CPU hog in %s: %w", n.Name, err)
		}
		procs = append(procs, p)
	}
	return heal, nil
}

// throttle limits p's CPU until healed.
func throttle(p *netlab.Proc) (func(context.Context) error, error) {
	heal := func(context.Context) error { return p.Unthrottle() }
	return heal, p.Throttle(throttleQuota, throttlePeriod)
}

// loop runs step every period in a goroutine until the heal it returns is
// called; the heal waits for the goroutine, then runs undo, whose error it
// returns with the first error a step returned.
func loop(ctx context.Context, period time.Duration, step func(ctx context.Context, i int) error, undo func() error) func(context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var (
		wg      sync.WaitGroup
		stepErr error
	)
	wg.Go(func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for i := 0; ; i++ {
			if err := step(ctx, i); err != nil && stepErr == nil && ctx.Err() == nil {
				stepErr = err
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return func(context.Context) error {
		cancel()
		wg.Wait()
		return errors.Join(stepErr, undo())
	}
}

// stalls stops the targets in turn, stallFor every stallEvery.
func stalls(ctx context.Context, tb *testbed, targets []*Node) (func(context.Context) error, error) {
	resumeAll := func() error {
		var errs []error
		for _, n := range targets {
			if err := n.Proc().Signal(syscall.SIGCONT); err != nil {
				errs = append(errs, fmt.Errorf("resume %s: %w", n.Name, err))
			}
		}
		return errors.Join(errs...)
	}
	step := func(ctx context.Context, i int) error {
		p := targets[i%len(targets)].Proc()
		if err := p.Signal(syscall.SIGSTOP); err != nil {
			return err
		}
		t := time.NewTimer(stallFor)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		return p.Signal(syscall.SIGCONT)
	}
	return loop(ctx, stallEvery, step, resumeAll), nil
}

// flap cuts the victim off from the other nodes and heals it, alternately,
// every flapEvery.
func flap(ctx context.Context, tb *testbed, v []*Node) (func(context.Context) error, error) {
	step := func(_ context.Context, i int) error {
		if i%2 == 1 {
			return tb.lab.Heal()
		}
		return tb.lab.Partition(hosts(v), hosts(tb.others(v[0])))
	}
	return loop(ctx, flapEvery, step, tb.lab.Heal), nil
}

// leavers are the nodes scale-down-up stops: the victim first (it joins
// again), then the last other node.
func leavers(tb *testbed) []*Node {
	v := tb.owner(tb.victim)
	others := tb.others(v)
	return []*Node{v, others[len(others)-1]}
}

// scaleDownUp stops the leavers gracefully one after the other and waits
// until the rest agree on the smaller cluster; the heal starts the first
// leaver again.
func scaleDownUp(ctx context.Context, tb *testbed, leave []*Node) (func(context.Context) error, error) {
	for _, n := range leave {
		tb.logf("  scale-down: stopping %s", n.Name)
		// Recorded first: a caller's load balancer drains a node before
		// it stops it.
		n.setLeft(true)
		tb.event(history.Event{Kind: history.NodeLeft, Nodes: []string{n.Name}})
		if err := tb.stopNode(ctx, n, 15*time.Second); err != nil {
			return noHeal, err
		}
	}
	if err := tb.waitConverged(ctx, convergeLimit); err != nil {
		return noHeal, err
	}
	return func(ctx context.Context) error {
		tb.logf("  scale-up: %s joins", leave[0].Name)
		leave[0].setLeft(false)
		err := tb.restartNode(ctx, leave[0])
		tb.event(history.Event{Kind: history.NodeJoined, Nodes: []string{leave[0].Name}})
		return err
	}, nil
}

// both starts a and then b, and heals them in the reverse order.
func both(a, b injectFunc) injectFunc {
	return func(ctx context.Context, tb *testbed, targets []*Node) (func(context.Context) error, error) {
		healA, err := a(ctx, tb, targets)
		if err != nil {
			return healA, err
		}
		healB, err := b(ctx, tb, targets)
		return func(ctx context.Context) error {
			var errB error
			if healB != nil {
				errB = healB(ctx)
			}
			return errors.Join(errB, healA(ctx))
		}, err
	}
}
