package intake

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/lease"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/policy"
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

// Over real gRPC, the owner's terms, numbers and limit name replace a
// sender's, so a peer cannot take more per grant or for longer.
func TestValidator_HandleLease_ownerTerms(t *testing.T) {
	f := newValidatorFixture(t)
	h := newGrantHandler(t, f.now)
	v, err := NewValidator(DefaultValidatorConfig(), h, staticPolicy{policy.Builtin()}, func() int64 { return f.now }, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := startServer(t, v)
	forged := tenantLease(1e9)
	forged.Limit = gcra.Limit{Interval: 1, Burst: 1 << 40}
	ans, err := f.c.Lease(t.Context(), addr, lease.Refresh{Seq: 3, Items: []lease.Request{forged}})
	if err != nil || len(ans) != 1 {
		t.Fatalf("Lease = %+v, %v", ans, err)
	}
	a := ans[0]
	if a.Err != nil || a.Outcome != lease.Granted || a.Units != 20 || a.TTL != int64(250*time.Millisecond) || a.Grantor != "owner#1" {
		t.Fatalf("answer %+v; want 20 units for 250ms from owner#1 (the policy's terms)", a)
	}
	got := h.got[0]
	if got.Peer != "n2#7" || got.Label != "per-tenant" || got.Limit != (gcra.Limit{Interval: 10_000_000, Burst: 50}) {
		t.Errorf("handler saw %+v; want the sender's name and the owner's limit and name", got)
	}
}

// Items the owner will not lease on are refused one by one; the others in
// the same refresh are answered in their place.
func TestValidator_HandleLease_refusals(t *testing.T) {
	now := int64(1_700_000_000_000_000_000)
	h := newGrantHandler(t, now)
	v, err := NewValidator(DefaultValidatorConfig(), h, staticPolicy{policy.Builtin()}, func() int64 { return now }, nil)
	if err != nil {
		t.Fatal(err)
	}
	user := tenantLease(10)
	user.Key = "weir:{t1}:per-user:t1:u1" // per-user has no lease terms
	group := tenantLease(10)
	group.Group = "t2"
	nan := tenantLease(math.NaN())
	neg := tenantLease(10)
	neg.Return = lease.Return{Grantor: "owner#1", Lease: 1, Unspent: -5}
	items := []lease.Request{user, group, tenantLease(10), nan, neg}
	ans := v.HandleLease(t.Context(), "n2#7", lease.Refresh{Seq: 1, Items: items})
	for i, want := range []string{"leases no limit", "hash tag", "", "demand", "return of -5"} {
		switch {
		case want == "" && (ans[i].Err != nil || ans[i].Outcome != lease.Granted):
			t.Errorf("item %d: %+v, want granted", i, ans[i])
		case want != "" && (!errors.Is(ans[i].Err, ErrRefused) || !strings.Contains(ans[i].Err.Error(), want)):
			t.Errorf("item %d: err %v, want a refusal about %q", i, ans[i].Err, want)
		}
	}
	if len(h.got) != 1 {
		t.Errorf("handler saw %d items, want only the valid one", len(h.got))
	}
	for _, from := range []string{"", strings.Repeat("x", maxFromBytes+1)} {
		ans := v.HandleLease(t.Context(), from, lease.Refresh{Seq: 2, Items: []lease.Request{tenantLease(10)}})
		if !errors.Is(ans[0].Err, ErrRefused) {
			t.Errorf("from %.10q: %+v, want refused", from, ans[0])
		}
	}
}
