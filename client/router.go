package client

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/routing"
)

// minRefreshGap spaces refreshes asked for by stale answers: while the
// nodes disagree about the ring (a member is joining or leaving), answers
// keep differing from any one table, and one refresh per gap is enough.
const minRefreshGap = 100 * time.Millisecond

// downFor is how long a member whose connection failed is skipped: its
// groups go to Config.Target meanwhile, and a refresh has been asked for.
const downFor = time.Second

// router holds the routing table and one connection per routable member.
//
// Concurrency: the table and its connections are published together as an
// immutable *route through an atomic pointer, so picking an owner never
// blocks. One goroutine (run) fetches tables and installs them; mu guards
// the connection map it maintains. A connection that leaves the table is
// retired: it closes once the last call using it has released it.
type router struct {
	dial     func(addr string) (*grpc.ClientConn, error)
	fetchers func() []weirv1.RateLimiterClient // Target first, then members
	every    time.Duration
	timeout  time.Duration
	maxConns int

	cur  atomic.Pointer[route] // nil until the first table
	kick chan struct{}         // buffered 1: refresh soon

	mu    sync.Mutex
	conns map[string]*memberConn // by address; only run and close write it
}

// route is one installed table with the connection of each member, by
// member index; nil where the member cannot be routed to.
type route struct {
	table *routing.Table
	conns []*memberConn
}

// memberConn is the connection to one member's public address.
type memberConn struct {
	cc        *grpc.ClientConn
	rpc       weirv1.RateLimiterClient
	refs      atomic.Int64 // calls using cc
	retired   atomic.Bool  // left the table: close when refs reaches 0
	downUntil atomic.Int64 // unix nanoseconds; skipped until then
	closeOnce sync.Once
}

// acquire reserves m for one call, and reports false when m is retired or
// down; a true must be paired with release.
func (m *memberConn) acquire() bool {
	if time.Now().UnixNano() < m.downUntil.Load() {
		return false
	}
	m.refs.Add(1)
	if m.retired.Load() {
		m.release()
		return false
	}
	return true
}

// release ends a call begun with acquire, closing a retired m when it was
// the last.
func (m *memberConn) release() {
	if m.refs.Add(-1) == 0 && m.retired.Load() {
		m.close()
	}
}

// retire closes m now if no call uses it, else when the last one releases.
// Either the last release sees retired or retire sees no refs, so m closes.
func (m *memberConn) retire() {
	m.retired.Store(true)
	if m.refs.Load() == 0 {
		m.close()
	}
}

func (m *memberConn) close() { m.closeOnce.Do(func() { _ = m.cc.Close() }) }

func (m *memberConn) markDown() { m.downUntil.Store(time.Now().Add(downFor).UnixNano()) }

// pick returns the connection of the owner of a request with these
// descriptors, or nil to send it to Config.Target. The caller acquires it
// before use (it may be retired or down by then).
func (r *router) pick(desc map[string]string) *memberConn {
	rt := r.cur.Load()
	if rt == nil {
		return nil
	}
	i, ok := rt.table.Owner(desc)
	if !ok {
		return nil
	}
	return rt.conns[i]
}

// pickGroup returns the connection of group g's owner, or nil to send to
// Config.Target; as pick.
func (r *router) pickGroup(g string) *memberConn {
	rt := r.cur.Load()
	if rt == nil {
		return nil
	}
	i, ok := rt.table.GroupOwner(g)
	if !ok {
		return nil
	}
	return rt.conns[i]
}

// observe compares an answer's ring epoch and policy version with the
// table's and asks for a refresh when they differ. An epoch of zero comes
// from a node that does not publish its topology.
func (r *router) observe(epoch uint64, policyVersion string) {
	if epoch == 0 {
		return
	}
	rt := r.cur.Load()
	if rt == nil || rt.table.Epoch() != epoch || rt.table.PolicyVersion() != policyVersion {
		r.refreshSoon()
	}
}

func (r *router) refreshSoon() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// run fetches a table at once, then every r.every and when asked (at most
// once per minRefreshGap), until ctx ends.
func (r *router) run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-r.kick:
		}
		last := time.Now()
		r.refresh(ctx)
		timer.Reset(r.every)
		// A kick that arrives within the gap waits for its end.
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(last.Add(minRefreshGap))):
		}
	}
}

// refresh asks Target, then each member in turn, for the topology and
// installs the first good answer. A node that does not publish one
// (UNIMPLEMENTED) ends the attempt: the client keeps sending to Target.
func (r *router) refresh(ctx context.Context) {
	for _, f := range r.fetchers() {
		fctx, cancel := context.WithTimeout(ctx, r.timeout)
		resp, err := f.Topology(fctx, &weirv1.TopologyRequest{})
		cancel()
		if status.Code(err) == codes.Unimplemented {
			return
		}
		if err != nil {
			continue
		}
		if t, err := routing.NewTable(resp); err == nil {
			r.install(t)
			return
		}
	}
}

// install publishes t with a connection per routable member, reusing the
// connections of members whose address is unchanged, and retires the rest.
// Members beyond maxConns, and any whose connection cannot be made, are
// not routed to.
func (r *router) install(t *routing.Table) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rt := &route{table: t, conns: make([]*memberConn, t.Members())}
	keep := make(map[string]*memberConn, t.Members())
	for i := range t.Members() {
		addr := t.Address(i)
		if addr == "" || len(keep) >= r.maxConns && keep[addr] == nil {
			continue
		}
		m := keep[addr]
		if m == nil {
			m = r.conns[addr]
		}
		if m == nil {
			cc, err := r.dial(addr)
			if err != nil {
				continue
			}
			m = &memberConn{cc: cc, rpc: weirv1.NewRateLimiterClient(cc)}
		}
		keep[addr] = m
		rt.conns[i] = m
	}
	r.cur.Store(rt)
	for addr, m := range r.conns {
		if keep[addr] != m {
			m.retire()
		}
	}
	r.conns = keep
}

// memberClients returns a Topology client for each member connection, to ask
// when Target does not answer.
func (r *router) memberClients() []weirv1.RateLimiterClient {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]weirv1.RateLimiterClient, 0, len(r.conns))
	for _, m := range r.conns {
		out = append(out, m.rpc)
	}
	return out
}

// close closes every connection; calls still using one fail (Client.Close
// has cancelled them already). The run goroutine must have ended.
func (r *router) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.conns {
		m.retired.Store(true)
		m.close()
	}
	r.conns = nil
	r.cur.Store(nil)
}
