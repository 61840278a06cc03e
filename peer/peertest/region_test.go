package peertest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/lease"
	"github.com/weirhq/weir/peer"
	"github.com/weirhq/weir/region"
)

// allKinds answers every kind of call (Decide, Lease, region reports) and
// counts them by kind. A report from "bad" is refused.
type allKinds struct {
	counter
	leases, reports atomic.Int64
}

func (h *allKinds) HandleLease(_ context.Context, _ string, r lease.Refresh) []peer.LeaseAnswer {
	h.leases.Add(1)
	out := make([]peer.LeaseAnswer, len(r.Items))
	for i := range out {
		out[i].Outcome, out[i].Units, out[i].TAT = lease.Granted, 3, 99
	}
	return out
}

func (h *allKinds) Handle(_ context.Context, r region.Report, forwarded bool) (region.Reply, error) {
	h.reports.Add(1)
	if r.From == "bad" {
		return region.Reply{}, fmt.Errorf("%w: from bad", region.ErrInvalidReport)
	}
	reply := region.Reply{Home: r.Home, To: r.From, Reporter: r.Reporter, Seq: r.Seq}
	for _, it := range r.Items {
		reply.Grants = append(reply.Grants, region.Grant{Key: it.Key, Share: 500, TTL: 1})
	}
	if forwarded {
		reply.Grants = append(reply.Grants, region.Grant{Key: "forwarded"})
	}
	r.Items[0].Key = "scribbled" // must not reach the caller's report
	return reply, nil
}

func (h *allKinds) calls() int64 { return h.n.Load() + h.leases.Load() + h.reports.Load() }

var rep = region.Report{From: "us", Reporter: "us-1#1", Home: "eu", Seq: 4, Items: []region.Demand{{Key: "k", Demand: 1}}}

func newAllKinds() (*Network, map[string]*allKinds) {
	n := NewNetwork()
	hs := map[string]*allKinds{}
	for _, name := range []string{"a", "b", "c"} {
		hs[name] = &allKinds{}
		n.Register(name, hs[name], peer.WithRegion(hs[name]))
	}
	return n, hs
}

func TestNetwork_Reporter_delivers(t *testing.T) {
	n, hs := newAllKinds()
	r := rep
	r.Items = []region.Demand{{Key: "k", Demand: 1}}
	reply, err := n.Reporter("a").Send(t.Context(), "b", r, true)
	if err != nil {
		t.Fatal(err)
	}
	if reply.To != "us" || reply.Seq != 4 || len(reply.Grants) != 2 || reply.Grants[0] != (region.Grant{Key: "k", Share: 500, TTL: 1}) {
		t.Fatalf("reply %+v, want one grant of k and the forwarded marker", reply)
	}
	if r.Items[0].Key != "k" {
		t.Fatal("the handler aliased the caller's report")
	}
	if hs["b"].reports.Load() != 1 || n.Sent("a", "b") != 1 {
		t.Fatal("the report was not counted once on a->b")
	}
	bad := rep
	bad.From = "bad"
	if _, err := n.Reporter("a").Send(t.Context(), "b", bad, false); !errors.Is(err, region.ErrInvalidReport) {
		t.Fatalf("a refused report: %v, want region.ErrInvalidReport", err)
	}
}

// A node registered without peer.WithRegion refuses reports; an unknown or
// unregistered node is ErrUnknownNode for reports too.
func TestNetwork_Reporter_noRegion(t *testing.T) {
	n, _ := newAllKinds()
	n.Register("plain", &counter{})
	if _, err := n.Reporter("a").Send(t.Context(), "plain", rep, false); err == nil || errors.Is(err, ErrUnknownNode) {
		t.Fatalf("a node without Region: %v, want a refusal", err)
	}
	n.Register("b", &counter{}) // b re-registers without Region
	if _, err := n.Reporter("a").Send(t.Context(), "b", rep, false); err == nil || errors.Is(err, ErrUnknownNode) {
		t.Fatalf("b re-registered without Region: %v, want a refusal", err)
	}
	n.Unregister("c")
	if _, err := n.Reporter("a").Send(t.Context(), "c", rep, false); !errors.Is(err, ErrUnknownNode) {
		t.Fatalf("an unregistered node: %v, want ErrUnknownNode", err)
	}
}

// Every fault applies alike to the three kinds of call: forwards, lease
// refreshes and region reports cross the same links.
func TestNetwork_faultsApplyToEveryKind(t *testing.T) {
	kinds := map[string]func(ctx context.Context, n *Network, from, to string) error{
		"decide": func(ctx context.Context, n *Network, from, to string) error {
			_, err := n.Forwarder(from).Decide(ctx, to, it)
			return err
		},
		"lease": func(ctx context.Context, n *Network, from, to string) error {
			_, err := n.Leaser(from).Lease(ctx, to, lease.Refresh{Seq: 1, Items: []lease.Request{{Peer: from, Key: "k"}}})
			return err
		},
		"report": func(ctx context.Context, n *Network, from, to string) error {
			r := rep
			r.Items = []region.Demand{{Key: "k"}}
			_, err := n.Reporter(from).Send(ctx, to, r, false)
			return err
		},
	}
	faults := []struct {
		name    string
		apply   func(n *Network)
		want    error
		handled int64 // calls b's handlers saw
	}{
		{"none", func(*Network) {}, nil, 1},
		{"drop a->b", func(n *Network) { n.Drop("a", "b") }, ErrDropped, 0},
		{"drop b->a", func(n *Network) { n.Drop("b", "a") }, ErrDropped, 1},
		{"blackhole", func(n *Network) { n.Blackhole("a", "b") }, context.DeadlineExceeded, 0},
		{"partition", func(n *Network) { n.Partition([]string{"a"}, []string{"b", "c"}) }, context.DeadlineExceeded, 0},
		{"delay past the deadline", func(n *Network) { n.Delay("a", "b", time.Hour) }, context.DeadlineExceeded, 0},
	}
	for kind, call := range kinds {
		for _, f := range faults {
			t.Run(kind+"/"+f.name, func(t *testing.T) {
				n, hs := newAllKinds()
				f.apply(n)
				err := call(shortCtx(t), n, "a", "b")
				if (f.want == nil && err != nil) || !errors.Is(err, f.want) {
					t.Fatalf("err = %v, want %v", err, f.want)
				}
				if got := hs["b"].calls(); got != f.handled {
					t.Fatalf("b handled %d calls, want %d", got, f.handled)
				}
				if got := int64(n.Sent("a", "b")); got != f.handled {
					t.Fatalf("Sent(a, b) = %d, want %d", got, f.handled)
				}
				n.HealAll()
				if err := call(shortCtx(t), n, "a", "b"); err != nil {
					t.Fatalf("after HealAll: %v", err)
				}
			})
		}
	}
}
