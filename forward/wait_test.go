package forward

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/peer"
)

// remoteTenants returns n tenants whose groups node from does not own, and
// the owner of each.
func (tc *testCluster) remoteTenants(from string, n int) (tenants, owners []string) {
	c := tc.nodes[from].routes
	for i := 0; len(tenants) < n; i++ {
		t := fmt.Sprint("batch-", i)
		if o := c.Owner(t); o != from {
			tenants, owners = append(tenants, t), append(owners, o)
		}
	}
	return tenants, owners
}

func batchOf(tenants []string) []limiter.Request {
	rs := make([]limiter.Request, len(tenants))
	for i, t := range tenants {
		rs[i] = limiter.Request{Descriptors: map[string]string{"tenant": t, "user": "u"}, Cost: 1}
	}
	return rs
}

func TestRouter_DecideBatch_forwardsConcurrently(t *testing.T) {
	tc := newTestCluster(t, 3, false)
	const delay = 20 * time.Millisecond
	for _, to := range []string{"node-1", "node-2"} {
		tc.net.Delay("node-0", to, delay)
	}
	tenants, _ := tc.remoteTenants("node-0", 100)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	ds, err := tc.nodes["node-0"].lim.DecideBatch(ctx, batchOf(tenants))
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range ds {
		if !d.Allowed || d.Fallback != nil {
			t.Fatalf("decision %d: %+v", i, d)
		}
	}
	// Serially this takes 100 delays; concurrently about one. The bound
	// leaves room for a loaded machine and the race detector.
	if took > 10*delay {
		t.Fatalf("100 forwarded items took %s, %d delays of %s", took, took/delay, delay)
	}
}

func TestRouter_DecideBatch_failingOwnerAffectsOnlyItsItems(t *testing.T) {
	tc := newTestCluster(t, 3, false)
	tc.net.Drop("node-0", "node-1")
	tenants, owners := tc.remoteTenants("node-0", 40)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ds, err := tc.nodes["node-0"].lim.DecideBatch(ctx, batchOf(tenants))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for i, d := range ds {
		seen[owners[i]]++
		switch fb := d.Fallback; {
		case owners[i] == "node-1" && (fb == nil || fb.Reason != "owner_unreachable"):
			t.Fatalf("item %d of the unreachable owner: %+v", i, d)
		case owners[i] == "node-2" && (fb != nil || !d.Allowed):
			t.Fatalf("item %d of the healthy owner: %+v", i, d)
		}
	}
	if seen["node-1"] == 0 || seen["node-2"] == 0 {
		t.Fatalf("owners %v: need items of both", seen)
	}
}

// keptForwarder keeps every item it is given and never answers, as a queue
// that sends a forward after its caller gave up.
type keptForwarder struct {
	mu    sync.Mutex
	items []decide.Request
}

func (f *keptForwarder) Decide(ctx context.Context, _ string, it decide.Request) (peer.Result, error) {
	f.mu.Lock()
	f.items = append(f.items, it)
	f.mu.Unlock()
	<-ctx.Done()
	return peer.Result{}, ctx.Err()
}

// The limiter reuses a store request's slices once Decide returns; a
// forward that outlives its caller must still carry its own keys.
func TestRouter_Decide_forwardOwnsItsItem(t *testing.T) {
	p := newSlowPair(t)
	f := &keptForwarder{}
	p.node().deps.Forwarder = f
	// 200ms deadlines: each call falls back 40ms before its deadline, which
	// scheduling on a loaded machine does not eat (the 4ms of 20ms did).
	p.decide(t, 200*time.Millisecond) // falls back; the item stays "queued"
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := p.tc.nodes[p.from].lim.Decide(ctx, limiter.Request{Descriptors: map[string]string{"tenant": "t7", "user": "someone-else"}, Cost: 1}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.items) == 0 {
		t.Fatal("nothing was forwarded")
	}
	if got, want := f.items[0].Keys[0], "weir:{t7}:per-user:t7:u1"; got != want {
		t.Fatalf("the first forward's key became %q after its caller returned; want %q", got, want)
	}
}
