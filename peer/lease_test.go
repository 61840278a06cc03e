package peer

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/lease"
	"github.com/weirhq/weir/memstore"
)

// grantHandler is memHandler that also grants leases from a lease.Grantor
// over the same memory, at a fixed time, and records what it was asked.
type grantHandler struct {
	memHandler
	now int64
	mu  sync.Mutex
	g   *lease.Grantor
	got []lease.Request
}

func newGrantHandler(t *testing.T, now int64) *grantHandler {
	cfg := lease.DefaultGrantorConfig()
	cfg.Name = "owner#1"
	g, err := lease.NewGrantor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &grantHandler{memHandler: memHandler{memstore.New(memstore.DefaultConfig())}, now: now, g: g}
}

func (h *grantHandler) HandleLease(_ context.Context, from string, r lease.Refresh) []LeaseAnswer {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]LeaseAnswer, len(r.Items))
	for i, it := range r.Items {
		h.got = append(h.got, it)
		if strings.Contains(it.Key, "elsewhere") {
			out[i].NotOwner = "n9"
			continue
		}
		a, err := h.g.Grant(h.s.Get(it.Group, it.Key), h.now, it)
		if err == nil {
			h.s.Put(it.Group, it.Key, a.TAT)
		}
		out[i] = LeaseAnswer{Answer: a, Err: err}
	}
	return out
}

// tenantLease asks for a lease on the built-in per-tenant limit (100/s,
// burst 50, lease max 20 ttl 250ms) of tenant t1, with forged terms.
func tenantLease(demand float64) lease.Request {
	return lease.Request{
		Peer: "n2#7", Group: "t1", Key: "weir:{t1}:per-tenant:t1",
		Limit: gcra.Limit{Interval: 10_000_000, Burst: 50}, Label: "forged",
		Terms:  lease.Terms{Max: 1_000_000, TTL: time.Hour},
		Demand: demand,
	}
}

// Not-owner and failed answers cross the wire; a server without a
// LeaseHandler answers UNIMPLEMENTED.
func TestClient_Lease_answerShapes(t *testing.T) {
	now := int64(1_700_000_000_000_000_000)
	h := newGrantHandler(t, now)
	addr := startServer(t, h)
	c, _ := newClient(t, nil)
	elsewhere := tenantLease(10)
	elsewhere.Key = "weir:{t1}:elsewhere"
	bad := tenantLease(10)
	bad.Terms = lease.Terms{} // the grantor refuses invalid terms
	ans, err := c.Lease(t.Context(), addr, lease.Refresh{Seq: 9, Items: []lease.Request{elsewhere, bad, tenantLease(0)}})
	if err != nil {
		t.Fatal(err)
	}
	if ans[0].NotOwner != "n9" || !errors.Is(ans[1].Err, ErrRemote) || ans[2].Err != nil || ans[2].Outcome != lease.Settled {
		t.Fatalf("answers %+v; want not-owner n9, a remote error, settled", ans)
	}
	plain := startServer(t, &fakeHandler{})
	_, err = c.Lease(t.Context(), plain, lease.Refresh{Seq: 1, Items: []lease.Request{tenantLease(1)}})
	if status.Code(errors.Unwrap(err)) != codes.Unimplemented && !strings.Contains(err.Error(), "Unimplemented") {
		t.Fatalf("err = %v, want UNIMPLEMENTED", err)
	}
}

// A scheduled grant crosses the wire: the peer's flag reaches the owner,
// and the schedule's start and spacing come back.
func TestClient_Lease_scheduledGrant(t *testing.T) {
	now := int64(1_700_000_000_000_000_000)
	h := newGrantHandler(t, now)
	addr := startServer(t, h)
	c, _ := newClient(t, nil)
	it := tenantLease(1000)
	it.Terms = lease.Terms{Max: 4, TTL: time.Second}
	it.Scheduled = true
	h.s.Put(it.Group, it.Key, now+it.Limit.Span()) // burst spent
	ans, err := c.Lease(t.Context(), addr, lease.Refresh{Seq: 1, Items: []lease.Request{it}})
	if err != nil {
		t.Fatal(err)
	}
	if !h.got[0].Scheduled {
		t.Fatal("the owner did not see the peer's scheduled flag")
	}
	a := ans[0]
	if a.Err != nil || a.Outcome != lease.Granted || a.Units != 4 || a.Start != it.Limit.Interval || a.Spacing != it.Limit.Interval {
		t.Fatalf("answer %+v, want 4 units from one interval, one interval apart", a)
	}
}
