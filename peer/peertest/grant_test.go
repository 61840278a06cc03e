package peertest

import (
	"context"
	"reflect"
	"testing"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/peer"
)

// opOwner records the items it got and answers each with grant, which it
// then scribbles over: the caller must hold a copy.
type opOwner struct {
	got   []decide.Request
	grant *decide.Grant
}

func (o *opOwner) HandleDecide(_ context.Context, _ string, items []decide.Request) []peer.Result {
	out := make([]peer.Result, len(items))
	for i, it := range items {
		o.got = append(o.got, it)
		out[i] = peer.Result{Overall: gcra.Result{Allowed: true}, Results: make([]gcra.Result, len(it.Keys)), Grant: o.grant}
	}
	return out
}

// The in-memory twin carries Reserve and Op as the wire does (cost 0 on an
// op item, no Grant, an Op of the owner's own), and the owner's Grant back
// as a copy; a Grant with nothing in it arrives as nil, as on the wire.
func TestNetwork_Forwarder_reserveOpGrant(t *testing.T) {
	n := NewNetwork()
	owner := &opOwner{grant: &decide.Grant{Permit: []byte("p"), Reservation: []byte("r"), InFlight: []int64{3}, Done: true, Expiry: 9,
		Settlement: gcra.Settlement{TAT: 1, Shift: 2, Refunded: 3, Kept: 4, Extra: 5, Forgiven: 6}}}
	n.Register("b", owner)
	item := it
	item.Keys = []string{"k"}
	item.Cost, item.Reserve, item.Grant = 4, true, &decide.Grant{Done: true}
	item.Op = &decide.Op{Kind: decide.OpRenew, ID: [16]byte{1}, TTL: 5, Actual: 6}
	r, err := n.Forwarder("a").Decide(t.Context(), "b", item)
	if err != nil {
		t.Fatal(err)
	}
	got := owner.got[0]
	if got.Cost != 0 || !got.Reserve || got.Grant != nil || got.Op == item.Op || *got.Op != *item.Op {
		t.Fatalf("owner got %+v (op %+v)", got, got.Op)
	}
	want := decide.Grant{Permit: []byte("p"), Reservation: []byte("r"), InFlight: []int64{3}, Done: true, Expiry: 9,
		Settlement: gcra.Settlement{Refunded: 3, Kept: 4, Extra: 5, Forgiven: 6}}
	owner.grant.Permit[0], owner.grant.InFlight[0] = 'x', 0
	if r.Grant == nil || !reflect.DeepEqual(*r.Grant, want) {
		t.Fatalf("grant %+v, want %+v", r.Grant, want)
	}
	owner.grant = &decide.Grant{Settlement: gcra.Settlement{TAT: 7}}
	if r, err := n.Forwarder("a").Decide(t.Context(), "b", item); err != nil || r.Grant != nil {
		t.Fatalf("an empty grant arrived as %+v, %v", r.Grant, err)
	}
}
