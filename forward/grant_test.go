package forward

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/intake"
	"github.com/weirhq/weir/leaselink"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/metrictest"
	"github.com/weirhq/weir/peer"
	"github.com/weirhq/weir/peer/peertest"
	"github.com/weirhq/weir/ring"
)

// The cluster path of concurrency limits, reservations and token ops,
// against fakes: a Router "a" over the in-memory network, with a stub
// owner and lease holder of its own, and owners "b" and "c" that are
// recording handlers.

// stubOwner is a's own owner: it decides every request allowed and fills
// a Grant the caller asked for.
type stubOwner struct {
	mu  sync.Mutex
	got []*decide.Request
}

func (o *stubOwner) Decide(_ context.Context, r *decide.Request, out []gcra.Result) (gcra.Result, error) {
	o.mu.Lock()
	o.got = append(o.got, r)
	o.mu.Unlock()
	for i := range out {
		out[i] = gcra.Result{Allowed: true}
	}
	if r.Grant != nil {
		r.Grant.Done = true
	}
	return gcra.Result{Allowed: true}, nil
}
func (o *stubOwner) ChargeDebt(context.Context, *decide.Request) peer.Result { return peer.Result{} }
func (o *stubOwner) MayWait(string, string, bool) bool                       { return false }
func (o *stubOwner) Drop(context.Context, func(string) bool)                 {}
func (o *stubOwner) OwnershipChanging()                                      {}
func (o *stubOwner) StartHeartbeat()                                         {}
func (o *stubOwner) StopHeartbeat()                                          {}
func (o *stubOwner) Beat(context.Context)                                    {}
func (o *stubOwner) ThawRequests() <-chan struct{}                           { return nil }

// stubLeases would decide every request it is asked to from a lease
// (unless none), and records the denials it is told of.
type stubLeases struct {
	none   bool
	spent  int
	denied []decide.Request
}

func (l *stubLeases) Spend(_ context.Context, r *decide.Request, _ decide.Route, out []gcra.Result, _ leaselink.Budgeter) (gcra.Result, bool) {
	if l.none {
		return gcra.Result{}, false
	}
	l.spent++
	for i := range out {
		out[i] = gcra.Result{Allowed: true}
	}
	return gcra.Result{Allowed: true}, true
}

func (l *stubLeases) NoteDenials(r *decide.Request, out []gcra.Result) {
	c := r.Clone()
	l.denied = append(l.denied, c)
}

// answerer is a remote owner: it records each item and answers it with
// answer(item).
type answerer struct {
	mu     sync.Mutex
	got    []decide.Request
	answer func(decide.Request) peer.Result
}

func (h *answerer) HandleDecide(_ context.Context, _ string, items []decide.Request) []peer.Result {
	out := make([]peer.Result, len(items))
	for i, it := range items {
		h.mu.Lock()
		h.got = append(h.got, it)
		h.mu.Unlock()
		out[i] = h.answer(it)
	}
	return out
}

func (h *answerer) items() []decide.Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]decide.Request(nil), h.got...)
}

// granted answers every key allowed, with grant.
func granted(grant *decide.Grant) func(decide.Request) peer.Result {
	return func(it decide.Request) peer.Result {
		return peer.Result{Overall: gcra.Result{Allowed: true}, Results: make([]gcra.Result, len(it.Keys)), Grant: grant}
	}
}

type grantRig struct {
	router *Router
	owner  *stubOwner
	leases *stubLeases
	b, c   *answerer
	reg    *prometheus.Registry
	// groupOf[n] is a group node n owns.
	groupOf map[string]string
}

func newGrantRig(t *testing.T) *grantRig {
	t.Helper()
	names := []string{"a", "b", "c"}
	rg, err := ring.New(ring.DefaultConfig(), names...)
	if err != nil {
		t.Fatal(err)
	}
	net := peertest.NewNetwork()
	g := &grantRig{owner: &stubOwner{}, leases: &stubLeases{}, reg: prometheus.NewRegistry(), groupOf: map[string]string{},
		b: &answerer{answer: granted(nil)}, c: &answerer{answer: granted(nil)}}
	net.Register("b", g.b)
	net.Register("c", g.c)
	g.router, err = New(DefaultConfig(), Deps{Routes: NewRoutes("a", rg), Forwarder: net.Forwarder("a"), Owner: g.owner, Leases: g.leases},
		nil, g.reg)
	if err != nil {
		t.Fatal(err)
	}
	g.router.SetMembers(t.Context(), map[string]string{"a": "a", "b": "b", "c": "c"})
	for i := 0; len(g.groupOf) < 3; i++ {
		grp := fmt.Sprintf("t%d", i)
		if o := g.router.routes.Owner(grp); g.groupOf[o] == "" {
			g.groupOf[o] = grp
		}
	}
	return g
}

var (
	concDef = &decide.Def{Name: "jobs", Concurrency: true}
	rateDef = &decide.Def{Name: "calls"}
)

// request is a decision in group grp on a concurrency key and a rate key
// (conc), or on a rate key alone.
func request(grp string, conc bool) *decide.Request {
	r := &decide.Request{Group: grp, Cost: 1, Now: 1_700_000_000_000_000_000,
		Keys: []string{"weir:{" + grp + "}:calls:" + grp}, Limits: []gcra.Limit{{Interval: 1e8, Burst: 10}}, Defs: []*decide.Def{rateDef}}
	if conc {
		r.Keys = append([]string{"weir:{" + grp + "}:jobs:" + grp}, r.Keys...)
		r.Limits = append([]gcra.Limit{{Interval: 30e9, Burst: 5}}, r.Limits...)
		r.Defs = append([]*decide.Def{concDef}, r.Defs...)
	}
	return r
}

func opRequest(grp string, kind decide.OpKind) *decide.Request {
	r := request(grp, kind != decide.OpSettle)
	if kind != decide.OpSettle {
		r.Keys, r.Limits, r.Defs = r.Keys[:1], r.Limits[:1], r.Defs[:1]
	}
	r.Cost, r.Op, r.Grant = 0, &decide.Op{Kind: kind, ID: [16]byte{3: 9}, TTL: 7e9, Actual: 2}, &decide.Grant{}
	return r
}

// An op goes to its group's owner, as the wire carries it (Op copied, no
// Defs or Grant), and the owner's Grant comes back into r.Grant.
func TestRouter_opRoutedToOwnerByGroup(t *testing.T) {
	g := newGrantRig(t)
	want := &decide.Grant{Done: true, Expiry: 42, InFlight: []int64{1}}
	g.b.answer, g.c.answer = granted(want), granted(&decide.Grant{Done: true, Expiry: 666})
	r := opRequest(g.groupOf["b"], decide.OpRenew)
	if _, err := g.router.Decide(t.Context(), r, make([]gcra.Result, 1)); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.Grant, want) {
		t.Fatalf("grant %+v, want %+v", r.Grant, want)
	}
	got := g.b.items()
	if len(got) != 1 || len(g.c.items()) != 0 || got[0].Op == r.Op || *got[0].Op != *r.Op || got[0].Grant != nil || got[0].Defs != nil ||
		got[0].Group != r.Group || !reflect.DeepEqual(got[0].Keys, r.Keys) {
		t.Fatalf("b got %+v", got)
	}
	// An owner's Grant that reads empty clears what the caller's held.
	g.b.answer = granted(nil)
	r.Grant = &decide.Grant{Done: true, Permit: []byte("stale")}
	if _, err := g.router.Decide(t.Context(), r, make([]gcra.Result, 1)); err != nil || !reflect.DeepEqual(*r.Grant, decide.Grant{}) {
		t.Fatalf("grant %+v, %v", r.Grant, err)
	}
	// A caller that asks for no Grant gets none, and nothing breaks.
	r.Grant = nil
	if _, err := g.router.Decide(t.Context(), r, make([]gcra.Result, 1)); err != nil || r.Grant != nil {
		t.Fatalf("grant %+v, %v", r.Grant, err)
	}
	// An op of a group this node owns goes to its own owner, which fills
	// the caller's Grant itself.
	mine := opRequest(g.groupOf["a"], decide.OpRelease)
	if _, err := g.router.Decide(t.Context(), mine, make([]gcra.Result, 1)); err != nil || !mine.Grant.Done || len(g.owner.got) != 1 || g.owner.got[0] != mine {
		t.Fatalf("local op: grant %+v, %v, owner got %d", mine.Grant, err, len(g.owner.got))
	}
}

// Reserve and Op cross to the owner; the reservation's Grant comes back.
func TestRouter_reserveCarriedAndGranted(t *testing.T) {
	g := newGrantRig(t)
	want := &decide.Grant{Reservation: []byte("tok"), Permit: []byte("p"), InFlight: []int64{2, 0}}
	g.c.answer = granted(want)
	r := request(g.groupOf["c"], true)
	r.Reserve, r.Grant = true, &decide.Grant{}
	if agg, err := g.router.Decide(t.Context(), r, make([]gcra.Result, 2)); err != nil || !agg.Allowed {
		t.Fatalf("%+v, %v", agg, err)
	}
	if got := g.c.items(); len(got) != 1 || !got[0].Reserve || got[0].Op != nil || got[0].Cost != 1 {
		t.Fatalf("c got %+v", got)
	}
	if !reflect.DeepEqual(r.Grant, want) {
		t.Fatalf("grant %+v, want %+v", r.Grant, want)
	}
}

// Only plain requests are decided from leases: an op, a reservation and a
// request with a concurrency key always go to the owner.
func TestRouter_concurrencyReserveOpNeverSpendLeases(t *testing.T) {
	g := newGrantRig(t)
	grp := g.groupOf["b"]
	reserve := request(grp, false)
	reserve.Reserve = true
	for name, r := range map[string]*decide.Request{
		"concurrency": request(grp, true),
		"reserve":     reserve,
		"release":     opRequest(grp, decide.OpRelease),
		"renew":       opRequest(grp, decide.OpRenew),
		"settle":      opRequest(grp, decide.OpSettle),
	} {
		before := len(g.b.items())
		if _, err := g.router.Decide(t.Context(), r, make([]gcra.Result, len(r.Keys))); err != nil || g.leases.spent != 0 || len(g.b.items()) != before+1 {
			t.Fatalf("%s: %v; %d spent from leases, %d forwarded", name, err, g.leases.spent, len(g.b.items())-before)
		}
	}
	if _, err := g.router.Decide(t.Context(), request(grp, false), make([]gcra.Result, 1)); err != nil || g.leases.spent != 1 {
		t.Fatalf("a plain request: %v, %d spent from leases", err, g.leases.spent)
	}
}

// The leases learn the owner's denials of rate keys only: never of a
// concurrency key, whose RetryAfter is no GCRA schedule, nor of an op.
func TestRouter_noteDenialsSkipsConcurrency(t *testing.T) {
	g := newGrantRig(t)
	g.leases.none = true
	g.b.answer = func(it decide.Request) peer.Result {
		rs := make([]gcra.Result, len(it.Keys))
		for i := range rs {
			rs[i] = gcra.Result{RetryAfter: int64(i+1) * 1e9}
		}
		return peer.Result{Results: rs}
	}
	grp := g.groupOf["b"]
	for _, r := range []*decide.Request{request(grp, true), opRequest(grp, decide.OpRelease), request(grp, false)} {
		if _, err := g.router.Decide(t.Context(), r, make([]gcra.Result, len(r.Keys))); err != nil {
			t.Fatal(err)
		}
	}
	rate := "weir:{" + grp + "}:calls:" + grp
	if len(g.leases.denied) != 2 {
		t.Fatalf("noted %d denials, want 2 (the composite's rate key, the plain request)", len(g.leases.denied))
	}
	for _, d := range g.leases.denied {
		if !reflect.DeepEqual(d.Keys, []string{rate}) || d.Defs[0].Concurrency {
			t.Fatalf("noted denials of %v", d.Keys)
		}
	}
}

// An op whose group's owner moved answers like a decision: one retry at
// the owner the answer names, then ownership_changing.
func TestRouter_opNotOwnerRetriesOnce(t *testing.T) {
	g := newGrantRig(t)
	want := &decide.Grant{Done: true}
	g.b.answer = func(decide.Request) peer.Result { return peer.Result{NotOwner: "c"} }
	g.c.answer = granted(want)
	r := opRequest(g.groupOf["b"], decide.OpSettle)
	if _, err := g.router.Decide(t.Context(), r, make([]gcra.Result, 1)); err != nil || !reflect.DeepEqual(r.Grant, want) {
		t.Fatalf("grant %+v, %v", r.Grant, err)
	}
	g.c.answer = func(decide.Request) peer.Result { return peer.Result{NotOwner: "b"} }
	r.Grant = &decide.Grant{}
	_, err := g.router.Decide(t.Context(), r, make([]gcra.Result, 1))
	if ue, ok := errors.AsType[*limiter.UnavailableError](err); !ok || ue.Reason != "ownership_changing" || r.Grant.Done {
		t.Fatalf("moving owner: %v, grant %+v", err, r.Grant)
	}
	if n := len(g.b.items()) + len(g.c.items()); n != 4 {
		t.Fatalf("%d forwards for two ops, want 4", n)
	}
	// Moved here: this node's owner decides it.
	g.b.answer = func(decide.Request) peer.Result { return peer.Result{NotOwner: "a"} }
	r.Grant = &decide.Grant{}
	if _, err := g.router.Decide(t.Context(), r, make([]gcra.Result, 1)); err != nil || !r.Grant.Done || len(g.owner.got) != 1 {
		t.Fatalf("moved here: %v, grant %+v", err, r.Grant)
	}
}

// A debt the owner refuses (its intake refuses debt on a concurrency key)
// is dropped, not kept to be refused at every flush.
func TestRouter_refusedDebtIsDropped(t *testing.T) {
	g := newGrantRig(t)
	g.leases.none = true
	grp := g.groupOf["b"]
	debts := make(chan struct{}, 1)
	g.b.answer = func(it decide.Request) peer.Result {
		if it.Debt {
			debts <- struct{}{}
			return peer.Result{Err: errors.New("refused"), Reason: intake.ReasonRefused}
		}
		return granted(nil)(it)
	}
	g.router.RecordFallback(grp, []string{"weir:{" + grp + "}:jobs:" + grp}, []gcra.Limit{{Interval: 30e9, Burst: 5}}, 2)
	if _, err := g.router.Decide(t.Context(), request(grp, false), make([]gcra.Result, 1)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-debts:
	case <-time.After(10 * time.Second):
		t.Fatal("no debt reached the owner")
	}
	deadline := time.Now().Add(10 * time.Second)
	for g.router.debts.flushingAny() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := g.router.debts.pending.Load(); n != 0 {
		t.Fatalf("%d refused debts kept", n)
	}
	if got := metrictest.Value(t, g.reg, "weir_fallback_debt_units_total", "event", "dropped"); got != 2 {
		t.Fatalf("dropped %v units, want 2", got)
	}
}
