package clientleasetest

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/clientlease"
	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/lease"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/policy"
)

// Node owns every key of its policy. Its clock is time.Now (Unix
// nanoseconds). Safe for concurrent use.
type Node struct {
	weirv1.UnimplementedRateLimiterServer
	pol atomic.Pointer[policy.Policy]
	mem *memstore.Store
	mu  sync.Mutex // guards g; taken under a memstore shard lock
	g   *lease.Grantor

	// Decides counts Decide RPCs; Refreshes counts relayed refreshes.
	Decides, Refreshes atomic.Int64
	// Down, while set, makes the relay answer every item Busy, as a node
	// whose owners are unreachable does.
	Down atomic.Bool
}

// New returns a Node deciding p's limits.
func New(p *policy.Policy) *Node {
	g, err := lease.NewGrantor(lease.GrantorConfig{Name: "owner#1", Grace: 5 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	n := &Node{mem: memstore.New(memstore.DefaultConfig()), g: g}
	n.pol.Store(p)
	return n
}

// Current returns the node's policy (clientlease.PolicySource).
func (n *Node) Current() *policy.Policy { return n.pol.Load() }

// SetPolicy replaces the node's policy, as a reload does.
func (n *Node) SetPolicy(p *policy.Policy) { n.pol.Store(p) }

func now() int64 { return time.Now().UnixNano() }

// Lease grants every item from the ledger (clientlease.Relay).
func (n *Node) Lease(ctx context.Context, holder string, r lease.Refresh) ([]lease.Answer, error) {
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	n.Refreshes.Add(1)
	out := make([]lease.Answer, len(r.Items))
	t := now()
	for i, it := range r.Items {
		out[i] = lease.Answer{Outcome: lease.Busy}
		if n.Down.Load() || it.Peer != holder {
			continue
		}
		_ = n.mem.UpdateAt(n.mem.Epoch(), it.Group, it.Key, t, func(tat int64, _ bool) (int64, error) {
			n.mu.Lock()
			defer n.mu.Unlock()
			a, err := n.g.Grant(tat, t, it)
			if err != nil {
				return 0, err
			}
			out[i] = a
			return a.TAT, nil
		})
	}
	return out, nil
}

// Outstanding returns the units out on open leases of key.
func (n *Node) Outstanding(group, key string) int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.g.Outstanding(group, key, now())
}

// Stats returns the ledger's counts by limit name.
func (n *Node) Stats() map[string]lease.GrantorStats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.g.Stats()
}

// Decide decides at the owner, on the Effective TATs.
func (n *Node) Decide(ctx context.Context, req *weirv1.DecideRequest) (*weirv1.DecideResponse, error) {
	n.Decides.Add(1)
	cost := req.GetCost()
	if req.Cost == nil {
		cost = 1
	}
	pol := n.Current()
	ms, err := pol.Resolve(req.GetDescriptors(), nil)
	if err != nil || cost < 1 {
		return nil, errors.Join(errors.New("clientleasetest: bad request"), err)
	}
	out := &weirv1.DecideResponse{Allowed: true, Matched: len(ms) > 0, PolicyVersion: pol.Version}
	if len(ms) == 0 {
		return out, nil
	}
	keys, limits := make([]string, len(ms)), make([]gcra.Limit, len(ms))
	for i, m := range ms {
		keys[i], limits[i] = m.Key, m.Params
	}
	group, t := ms[0].GroupValue, now()
	res := make([]gcra.Result, len(ms))
	adjust := func(key string, tat int64) int64 {
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.g.Effective(group, key, tat, t)
	}
	agg, err := n.mem.DecideAdjusted(ctx, n.mem.Epoch(), group, keys, limits, cost, t, res, adjust)
	if err != nil {
		return nil, err
	}
	out.Allowed, out.Remaining, out.TooCostly = agg.Allowed, agg.Remaining, agg.TooCostly
	if !agg.Allowed && !agg.TooCostly {
		out.RetryAfter = durationpb.New(time.Duration(agg.RetryAfter))
	}
	for i, m := range ms {
		out.Limits = append(out.Limits, &weirv1.LimitStatus{
			Name: m.Limit.Name, Key: m.Key, Allowed: res[i].Allowed, Remaining: res[i].Remaining,
			RetryAfter: durationpb.New(time.Duration(res[i].RetryAfter)), Burst: m.Params.Burst,
			Window: durationpb.New(time.Duration(m.Params.Interval * m.Params.Burst)), TooCostly: res[i].TooCostly,
		})
	}
	return out, nil
}

// Server is a Node served on a loopback port.
type Server struct {
	Addr    string
	Service *clientlease.Service
	gs      *grpc.Server
}

// Serve serves n's Decide and, over n as the relay, weir.v1.Leases with
// cfg (Name set if empty) and clk (nil: the real clock) on a free loopback
// port until the test ends (or Stop).
func Serve(t testing.TB, n *Node, cfg clientlease.Config, clk clock.Clock) *Server {
	t.Helper()
	return ServeAt(t, "127.0.0.1:0", n, cfg, clk)
}

// ServeAt is Serve on addr (for a node that comes back where it was).
func ServeAt(t testing.TB, addr string, n *Node, cfg clientlease.Config, clk clock.Clock) *Server {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "test#1"
	}
	svc, err := clientlease.New(cfg, clientlease.Deps{Relay: n, Policies: n, Members: func() int { return 1 }, Clock: clk}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.WaitForHandlers(true)) // Stop waits for the Hold streams
	weirv1.RegisterRateLimiterServer(gs, n)
	clientlease.Register(gs, svc)
	go gs.Serve(lis)
	s := &Server{Addr: lis.Addr().String(), Service: svc, gs: gs}
	t.Cleanup(s.Stop)
	return s
}

// Stop ends the server at once: streams and calls fail.
func (s *Server) Stop() { s.gs.Stop() }
