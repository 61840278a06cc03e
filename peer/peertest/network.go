package peertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/lease"
	"github.com/weirhq/weir/peer"
	"github.com/weirhq/weir/region"
)

// Errors returned by a Forwarder of the Network.
var (
	// ErrUnknownNode is returned for a call to a name with no Handler
	// registered, like a connection refused.
	ErrUnknownNode = errors.New("peertest: unknown node")
	// ErrDropped is returned at once for a call over a dropped link.
	ErrDropped = errors.New("peertest: link dropped")
)

// fault is the state of one direction of a link.
type fault int

const (
	healthy   fault = iota
	dropped         // fail at once
	blackhole       // hang until the caller's context ends
)

type link struct{ from, to string }

// Network connects named nodes in process. Its zero value is not usable;
// call NewNetwork. It is safe for concurrent use, and faults may change
// while calls are in flight (a call sees the state when it crosses a link).
//
// A call from node a to node b crosses the link a->b with the request and
// b->a with the answer. A fault on a->b fails the call before b sees it; a
// fault on b->a fails it after b decided, the answer lost, as with a real
// network.
type Network struct {
	mu       sync.Mutex
	handlers map[string]peer.Handler
	regions  map[string]peer.RegionHandler
	faults   map[link]fault
	delays   map[link]time.Duration
	sent     map[link]int
}

// NewNetwork returns a Network with no nodes and no faults.
func NewNetwork() *Network {
	return &Network{
		handlers: make(map[string]peer.Handler),
		regions:  make(map[string]peer.RegionHandler),
		faults:   make(map[link]fault),
		delays:   make(map[link]time.Duration),
		sent:     make(map[link]int),
	}
}

// Register makes h answer the calls addressed to name, and opts add the
// services peer.Register would (peer.WithRegion), replacing whatever name
// served before.
func (n *Network) Register(name string, h peer.Handler, opts ...peer.ServeOption) {
	var sv peer.Services
	for _, o := range opts {
		o(&sv)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.handlers[name] = h
	if sv.Region != nil {
		n.regions[name] = sv.Region
	} else {
		delete(n.regions, name)
	}
}

// Unregister removes name: later calls to it fail with ErrUnknownNode.
func (n *Network) Unregister(name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.handlers, name)
	delete(n.regions, name)
}

// Drop makes calls over from->to fail at once with ErrDropped, like a
// refused connection. One direction only.
func (n *Network) Drop(from, to string) { n.setFault(from, to, dropped) }

// Blackhole makes calls over from->to hang until the caller's context ends,
// like a partition or a frozen peer. One direction only.
func (n *Network) Blackhole(from, to string) { n.setFault(from, to, blackhole) }

// Partition blackholes every link between a node of a and a node of b, both
// ways. Links within a and within b are untouched.
func (n *Network) Partition(a, b []string) {
	for _, x := range a {
		for _, y := range b {
			n.Blackhole(x, y)
			n.Blackhole(y, x)
		}
	}
}

// Delay delays every request over from->to by d, honouring the caller's
// context. Keep d tiny in tests. 0 removes the delay.
func (n *Network) Delay(from, to string, d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.delays[link{from, to}] = d
}

// Heal removes any drop, blackhole or delay on from->to.
func (n *Network) Heal(from, to string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.faults, link{from, to})
	delete(n.delays, link{from, to})
}

// HealAll removes every drop, blackhole and delay.
func (n *Network) HealAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.faults)
	clear(n.delays)
}

// Sent reports how many requests of any kind (Decide, Lease, Send)
// crossed from->to and reached the handler.
func (n *Network) Sent(from, to string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.sent[link{from, to}]
}

func (n *Network) setFault(from, to string, f fault) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.faults[link{from, to}] = f
}

// Forwarder returns the peer.Forwarder of node from; its addresses are node
// names.
func (n *Network) Forwarder(from string) peer.Forwarder {
	return forwarder{n: n, from: from}
}

type forwarder struct {
	n    *Network
	from string
}

var _ peer.Forwarder = forwarder{}

// Decide carries it to the node named addr, one item per call (there is no
// batching in memory). The item and the result are copied, as if
// serialized, so neither side can alias the other's slices.
func (f forwarder) Decide(ctx context.Context, addr string, it decide.Request) (peer.Result, error) {
	if err := ctx.Err(); err != nil {
		return peer.Result{}, err
	}
	if err := f.n.cross(ctx, f.from, addr); err != nil {
		return peer.Result{}, err
	}
	h, ok := f.n.handler(addr)
	if !ok {
		return peer.Result{}, fmt.Errorf("%w: %q", ErrUnknownNode, addr)
	}
	f.n.count(f.from, addr)
	rs := h.HandleDecide(ctx, f.from, []decide.Request{cloneItem(it)})
	if len(rs) != 1 {
		return peer.Result{}, fmt.Errorf("peertest: %s returned %d results for 1 item", addr, len(rs))
	}
	if err := f.n.cross(ctx, addr, f.from); err != nil {
		return peer.Result{}, err
	}
	r := rs[0]
	r.Results = slices.Clone(r.Results)
	r.Grant = cloneGrant(r.Grant)
	return r, nil
}

// cloneGrant copies g as the wire does: a Grant whose fields are all zero
// arrives as nil (peer's ItemResult fields 6-14 are then absent).
func cloneGrant(g *decide.Grant) *decide.Grant {
	if g == nil {
		return nil
	}
	c := *g
	c.Permit, c.Reservation, c.InFlight = bytes.Clone(g.Permit), bytes.Clone(g.Reservation), slices.Clone(g.InFlight)
	c.Settlement.TAT, c.Settlement.Shift = 0, 0 // not on the wire
	if len(c.Permit) == 0 && len(c.Reservation) == 0 && len(c.InFlight) == 0 && !c.Done && c.Expiry == 0 && c.Settlement == (gcra.Settlement{}) {
		return nil
	}
	if len(c.Permit) == 0 {
		c.Permit = nil
	}
	if len(c.Reservation) == 0 {
		c.Reservation = nil
	}
	if len(c.InFlight) == 0 {
		c.InFlight = nil
	}
	return &c
}

// cross applies the delay and fault of from->to.
func (n *Network) cross(ctx context.Context, from, to string) error {
	n.mu.Lock()
	f, d := n.faults[link{from, to}], n.delays[link{from, to}]
	n.mu.Unlock()
	switch f {
	case dropped:
		return fmt.Errorf("%w: %s->%s", ErrDropped, from, to)
	case blackhole:
		<-ctx.Done()
		return ctx.Err()
	}
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		// After a stall both may be ready and select picks either; a
		// message that arrives after its deadline is not delivered.
		return ctx.Err()
	}
	return nil
}

func (n *Network) handler(name string) (peer.Handler, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	h, ok := n.handlers[name]
	return h, ok
}

func (n *Network) count(from, to string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sent[link{from, to}]++
}

// cloneItem copies it as the wire carries it: its own Keys, Limits and Op,
// no Grant (the answer carries the owner's), and cost 0 on an op item.
func cloneItem(it decide.Request) decide.Request {
	it.Keys = slices.Clone(it.Keys)
	it.Limits = slices.Clone(it.Limits)
	it.Grant = nil
	if it.Op != nil {
		op := *it.Op
		it.Op, it.Cost = &op, 0
	}
	return it
}

// Leaser returns the peer.Leaser of node from; its addresses are node
// names. A node whose Handler is not a peer.LeaseHandler answers every
// refresh with an error, like a server without the Lease RPC.
func (n *Network) Leaser(from string) peer.Leaser {
	return forwarder{n: n, from: from}
}

var _ peer.Leaser = forwarder{}

// Lease carries r to the node named addr over the same links, faults and
// counts as Decide. The refresh and the answers are copied.
func (f forwarder) Lease(ctx context.Context, addr string, r lease.Refresh) ([]peer.LeaseAnswer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := f.n.cross(ctx, f.from, addr); err != nil {
		return nil, err
	}
	h, ok := f.n.handler(addr)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownNode, addr)
	}
	lh, ok := h.(peer.LeaseHandler)
	if !ok {
		return nil, fmt.Errorf("peertest: %s grants no leases", addr)
	}
	f.n.count(f.from, addr)
	r.Items = slices.Clone(r.Items)
	from := f.from
	if len(r.Items) > 0 {
		from = r.Items[0].Peer // the holder's name plus incarnation
	}
	answers := slices.Clone(lh.HandleLease(ctx, from, r))
	if len(answers) != len(r.Items) {
		return nil, fmt.Errorf("peertest: %s returned %d lease answers for %d items", addr, len(answers), len(r.Items))
	}
	for i := range answers {
		answers[i].TAT = 0 // the owner's state never travels
	}
	if err := f.n.cross(ctx, addr, f.from); err != nil {
		return nil, err
	}
	return answers, nil
}

// Reporter returns the peer.Reporter of node from (a regionlink.Sender);
// its addresses are node names. A node registered without
// peer.WithRegion answers every report with an error, like a server
// without the Region service.
func (n *Network) Reporter(from string) peer.Reporter {
	return forwarder{n: n, from: from}
}

var _ peer.Reporter = forwarder{}

// Send carries r to the node named addr over the same links, faults and
// counts as Decide and Lease. The report and the reply are copied.
func (f forwarder) Send(ctx context.Context, addr string, r region.Report, forwarded bool) (region.Reply, error) {
	if err := ctx.Err(); err != nil {
		return region.Reply{}, err
	}
	if err := f.n.cross(ctx, f.from, addr); err != nil {
		return region.Reply{}, err
	}
	rh, err := f.n.region(addr)
	if err != nil {
		return region.Reply{}, err
	}
	f.n.count(f.from, addr)
	r.Items = slices.Clone(r.Items)
	reply, err := rh.Handle(ctx, r, forwarded)
	if err != nil {
		return region.Reply{}, fmt.Errorf("peertest: %s: %w", addr, err)
	}
	reply.Grants = slices.Clone(reply.Grants)
	if err := f.n.cross(ctx, addr, f.from); err != nil {
		return region.Reply{}, err
	}
	return reply, nil
}

// region returns the RegionHandler of name.
func (n *Network) region(name string) (peer.RegionHandler, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if rh, ok := n.regions[name]; ok {
		return rh, nil
	}
	if _, ok := n.handlers[name]; ok {
		return nil, fmt.Errorf("peertest: %s serves no region reports", name)
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownNode, name)
}
