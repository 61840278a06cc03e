package regionlink

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/grpclimit/grpclimittest"
	"github.com/weirhq/weir/peer"
	"github.com/weirhq/weir/peer/peertest"
	"github.com/weirhq/weir/region"
)

// The node-to-node plane carries reports: peer.Client and peertest's
// network are Senders, and a Link is the RegionHandler peer.Register
// serves.
var (
	_ Sender             = (*peer.Client)(nil)
	_ Sender             = peer.Reporter(nil)
	_ peer.RegionHandler = (*Link)(nil)
)

// noDecisions is a peer.Handler for a server that only answers reports.
type noDecisions struct{}

func (noDecisions) HandleDecide(_ context.Context, _ string, items []decide.Request) []peer.Result {
	return make([]peer.Result, len(items))
}

// serve serves l as the Region of a peer server on a :0 port until the
// test ends and returns its address.
func serve(t *testing.T, l *Link) string {
	t.Helper()
	return grpclimittest.Serve(t, peer.DefaultServerConfig().ServerOptions(), func(s *grpc.Server) {
		peer.Register(s, noDecisions{}, peer.WithRegion(l))
	})
}

func TestLink_Handle_overPeerClient(t *testing.T) {
	n, clk := newNet(), newClock()
	k := keyHomedIn(t, "eu", 0)
	eu := newLink(t, n, clk, "eu", "eu-1", func(string) string { return "eu-1" })
	clk.Advance(2 * testShares().TTL) // past the home's quiet period
	addr := serve(t, eu)
	c, err := peer.NewClient(peer.DefaultClientConfig(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	r := region.Report{From: "us", Reporter: "us-1#1", Home: "eu", Seq: 7, Items: []region.Demand{{Key: k, Demand: 0.5}}}
	reply, err := c.Send(ctx, addr, r, false)
	if err != nil {
		t.Fatal(err)
	}
	if reply.To != "us" || reply.Reporter != "us-1#1" || reply.Seq != 7 || len(reply.Grants) != 1 ||
		reply.Grants[0].Key != k || reply.Grants[0].Share != region.Whole-testShares().Floor || reply.Grants[0].TTL != int64(testShares().TTL) {
		t.Fatalf("reply %+v", reply)
	}

	r.Items[0].Demand = -1
	_, err = c.Send(ctx, addr, r, false)
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a negative demand: %v, want INVALID_ARGUMENT", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, addr, r, false); err == nil {
		t.Fatal("Send after Close succeeded")
	}
}

// Two regions' Links over peertest's in-memory network: rounds grant over
// it, and across a partition no report arrives and the share stands.
func TestLink_Round_overPeertest(t *testing.T) {
	clk := newClock()
	pn := peertest.NewNetwork()
	links := map[string]*Link{}
	for _, rg := range []string{"eu", "us"} {
		peers := map[string]string{"eu": "eu-1", "us": "us-1"}
		delete(peers, rg)
		cfg := DefaultConfig(rg, rg+"-1", peers)
		cfg.Shares = testShares()
		cfg.CallTimeout = cfg.Shares.Interval
		self := rg + "-1"
		l, err := New(cfg, Deps{Owners: owners{self: self, owner: func(string) string { return self }},
			Sender: pn.Reporter(self), LimitName: limitName, Group: group, Clock: clk, FirstSeq: 1}, nil, prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		pn.Register(self, noDecisions{}, peer.WithRegion(l))
		links[rg] = l
	}
	us, eu := links["us"], links["eu"]
	k := keyHomedIn(t, "eu", 0)
	floor := mustLimit(t, testShares().Floor)
	rounds(t, clk, 20, 200, map[*Link][]string{us: {k}, eu: nil})
	lim, _ := enforce(t, us, tats{}, k, 200, 0)
	if lim == floor || pn.Sent("us-1", "eu-1") == 0 {
		t.Fatalf("after 20 rounds over the network us holds %+v (floor %+v), %d reports sent", lim, floor, pn.Sent("us-1", "eu-1"))
	}
	pn.Partition([]string{"us-1"}, []string{"eu-1"})
	sent := pn.Sent("us-1", "eu-1")
	rounds(t, clk, 1, 200, map[*Link][]string{us: {k}})
	if got, _ := enforce(t, us, tats{}, k, 200, 0); got != lim || pn.Sent("us-1", "eu-1") != sent {
		t.Fatalf("across the partition: %+v (was %+v), %d reports reached eu (was %d)", got, lim, pn.Sent("us-1", "eu-1"), sent)
	}
}
