package client_test

import (
	"context"
	"fmt"
	"testing"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/ticket"
)

// The cluster's fake nodes answer operations on tokens too, recording the
// token's group (or "?" for a token without one) as the tenant decided.

func (n *routeNode) Release(_ context.Context, r *weirv1.ReleaseRequest) (*weirv1.ReleaseResponse, error) {
	n.recordToken(r.GetPermit())
	return &weirv1.ReleaseResponse{Released: true}, nil
}

func (n *routeNode) Renew(_ context.Context, r *weirv1.RenewRequest) (*weirv1.RenewResponse, error) {
	n.recordToken(r.GetPermit())
	return &weirv1.RenewResponse{Renewed: true}, nil
}

func (n *routeNode) Settle(_ context.Context, r *weirv1.SettleRequest) (*weirv1.SettleResponse, error) {
	n.recordToken(r.GetReservation())
	return &weirv1.SettleResponse{Settled: true}, nil
}

func (n *routeNode) recordToken(tok []byte) {
	g, err := ticket.Group(tok)
	if err != nil {
		g = "?"
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.seen = append(n.seen, g)
}

func token(t *testing.T, kind ticket.Kind, group string) []byte {
	t.Helper()
	tok, err := ticket.Encode(ticket.Ticket{Kind: kind, Group: group, Keys: []string{"weir:{" + group + "}:l:" + group}, ID: [16]byte{1}})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestClient_ops_routeByTokenGroup(t *testing.T) {
	c, addrs := newCluster(t, 3)
	table := c.publish(5, addrs, -1)
	cl := routeClient(t, addrs[0], forever) // ops are never batched
	waitEpoch(t, cl, 5)
	for i := range 30 {
		g := fmt.Sprint("g", i)
		var err error
		switch i % 3 {
		case 0:
			_, err = cl.Release(t.Context(), token(t, ticket.Permit, g))
		case 1:
			_, _, err = cl.Renew(t.Context(), token(t, ticket.Permit, g), 0)
		case 2:
			_, err = cl.Settle(t.Context(), token(t, ticket.Reservation, g), 1)
		}
		if err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
	}
	// A token whose group cannot be read goes to Target, which answers
	// for itself (here: as if valid; a real node says INVALID_ARGUMENT).
	if _, err := cl.Release(t.Context(), []byte("opaque")); err != nil {
		t.Fatal(err)
	}
	for i, n := range c.nodes {
		got := n.tenants()
		if len(got) == 0 {
			t.Errorf("node %d answered no operation", i)
		}
		for _, g := range got {
			if g == "?" {
				if i != 0 {
					t.Errorf("an unreadable token went to node %d, not Target", i)
				}
				continue
			}
			if o, _ := table.GroupOwner(g); o != i {
				t.Errorf("group %s answered by node %d, its owner is %d", g, i, o)
			}
		}
	}
}

func TestClient_Acquire_routesByDescriptors(t *testing.T) {
	c, addrs := newCluster(t, 3)
	table := c.publish(6, addrs, -1)
	cl := routeClient(t, addrs[0], forever)
	waitEpoch(t, cl, 6)
	for i := range 30 {
		d := map[string]string{"tenant": fmt.Sprint("t", i)}
		var err error
		if i%2 == 0 {
			_, _, err = cl.Acquire(t.Context(), d)
		} else {
			_, _, err = cl.Reserve(t.Context(), d, 3)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, n := range c.nodes {
		for _, tenant := range n.tenants() {
			if o, _ := table.Owner(map[string]string{"tenant": tenant}); o != i {
				t.Errorf("tenant %s decided by node %d, its owner is %d", tenant, i, o)
			}
		}
	}
}
