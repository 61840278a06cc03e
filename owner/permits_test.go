package owner

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/clock/clocktest"
	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/metrictest"
	"github.com/weirhq/weir/permit"
	"github.com/weirhq/weir/redisbackend"
	"github.com/weirhq/weir/redisbackend/redistest"
	"github.com/weirhq/weir/ticket"
	"github.com/weirhq/weir/writebehind"
)

const (
	concKey       = "weir:{t1}:exports:t1"
	permitRateKey = "weir:{t1}:per-tenant:t1"
)

var (
	concDef       = &decide.Def{Name: "exports", Concurrency: true}
	permitRateDef = &decide.Def{Name: "per-tenant"}
)

// permitOwner is an owner named name over redis (nil: no Redis), on clk.
type permitOwner struct {
	o    *Owner
	mem  *memstore.Store
	ring *movableRing
	clk  *clocktest.Manual
	reg  *prometheus.Registry
}

func newPermitOwner(t *testing.T, name string, ring *movableRing, clk *clocktest.Manual, redis *redistest.Memory, maxKeys int) *permitOwner {
	t.Helper()
	f := &permitOwner{mem: memstore.New(memstore.DefaultConfig()), ring: ring, clk: clk, reg: prometheus.NewRegistry()}
	cfg := DefaultConfig()
	cfg.LocalName, cfg.LoadTimeout, cfg.MaxPermitKeys = name, time.Second, maxKeys
	deps := Deps{Ring: ring, Mem: f.mem, Clock: clk}
	if redis != nil {
		wb, err := writebehind.New(writebehind.DefaultConfig(), redis, func() int64 { return clk.Now().UnixNano() }, nil, prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		q, err := redisbackend.NewStrictQueue(redis, time.Second, 16)
		if err != nil {
			t.Fatal(err)
		}
		deps.Redis, deps.Strict, deps.WriteBehind, deps.Permits = redis, q, wb, redis
	}
	var err error
	if f.o, err = New(cfg, deps, nil, f.reg); err != nil {
		t.Fatal(err)
	}
	return f
}

func newPermitPair(t *testing.T, withRedis bool, maxKeys int) (*permitOwner, *redistest.Memory) {
	clk := clocktest.NewManual(time.Now())
	var redis *redistest.Memory
	if withRedis {
		redis = redistest.NewMemory(clk)
	}
	return newPermitOwner(t, "a", &movableRing{owner: "a"}, clk, redis, maxKeys), redis
}

func (f *permitOwner) now() int64 { return f.clk.Now().UnixNano() }

// acquire asks for cost slots of concKey (at most n live, ttl each), with
// rate, if set, as a second (rate) limit on permitRateKey.
func (f *permitOwner) acquire(t *testing.T, n int64, ttl time.Duration, cost int64, rate *gcra.Limit) (*decide.Request, gcra.Result, []gcra.Result, error) {
	t.Helper()
	r := &decide.Request{Group: "t1", Keys: []string{concKey}, Limits: []gcra.Limit{{Burst: n, Interval: ttl.Nanoseconds()}},
		Defs: []*decide.Def{concDef}, Cost: cost, Now: f.now(), Grant: &decide.Grant{}}
	if rate != nil {
		r.Keys, r.Limits, r.Defs = append(r.Keys, permitRateKey), append(r.Limits, *rate), append(r.Defs, permitRateDef)
	}
	out := make([]gcra.Result, len(r.Keys))
	agg, err := f.o.Decide(t.Context(), r, out)
	return r, agg, out, err
}

// op releases or renews the permit of tok (ttl for a renew).
func (f *permitOwner) op(t *testing.T, kind decide.OpKind, tok []byte, n int64, limTTL, ttl time.Duration) (*decide.Grant, error) {
	t.Helper()
	tk, err := ticket.Decode(tok)
	if err != nil {
		t.Fatal(err)
	}
	r := &decide.Request{Group: tk.Group, Keys: tk.Keys, Now: f.now(), Op: &decide.Op{Kind: kind, ID: tk.ID, TTL: ttl.Nanoseconds()}, Grant: &decide.Grant{}}
	for range tk.Keys {
		r.Limits, r.Defs = append(r.Limits, gcra.Limit{Burst: n, Interval: limTTL.Nanoseconds()}), append(r.Defs, concDef)
	}
	_, err = f.o.Decide(context.Background(), r, make([]gcra.Result, len(r.Keys)))
	return r.Grant, err
}

func (f *permitOwner) inFlight(t *testing.T) int64 {
	t.Helper()
	n, _, _, _ := f.o.Permits("t1", concKey, f.now())
	return n
}

// forged is a permit token on concKey with an id no owner handed out.
func forged(t *testing.T) []byte {
	tok, err := ticket.Encode(ticket.Ticket{Kind: ticket.Permit, Group: "t1", Keys: []string{concKey}, ID: [16]byte{9, 9, 9}})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// The table of the basic lifecycle, with explicit steps on one key of
// N = 2, ttl 10s: acquire, deny with the exact wait, release, renew,
// expiry.
func TestOwner_permits_lifecycle(t *testing.T) {
	f, redis := newPermitPair(t, true, 0)
	const n, ttl = 2, 10 * time.Second
	r1, agg, out, err := f.acquire(t, n, ttl, 1, nil)
	if err != nil || !agg.Allowed || r1.Grant.Permit == nil || r1.Grant.InFlight[0] != 1 || out[0].Remaining != 1 || out[0].ResetAfter != ttl.Nanoseconds() {
		t.Fatalf("first acquire: %+v %+v grant %+v, %v", agg, out, r1.Grant, err)
	}
	if _, ok := redis.Set(concKey); !ok {
		t.Fatal("an admitted acquire is not in Redis (write-through)")
	}
	f.clk.Advance(2 * time.Second)
	r2, agg, _, err := f.acquire(t, n, ttl, 1, nil)
	if err != nil || !agg.Allowed {
		t.Fatalf("second acquire: %+v, %v", agg, err)
	}
	f.clk.Advance(time.Second)
	r3, agg, out, err := f.acquire(t, n, ttl, 1, nil)
	if err != nil || agg.Allowed || r3.Grant.Permit != nil || agg.RetryAfter != (7*time.Second).Nanoseconds() || r3.Grant.InFlight[0] != 2 {
		t.Fatalf("third acquire: %+v %+v grant %+v, %v; want denied, retry 7s", agg, out, r3.Grant, err)
	}
	if g, err := f.op(t, decide.OpRelease, r1.Grant.Permit, n, ttl, 0); err != nil || !g.Done {
		t.Fatalf("release: %+v, %v", g, err)
	}
	if g, err := f.op(t, decide.OpRelease, r1.Grant.Permit, n, ttl, 0); err != nil || g.Done {
		t.Fatalf("second release: %+v, %v; want Done false", g, err)
	}
	// Renew: 0 is the limit's ttl, longer is clamped to it, shorter kept.
	for _, c := range []struct{ ttl, want time.Duration }{{0, ttl}, {time.Hour, ttl}, {3 * time.Second, 3 * time.Second}} {
		g, err := f.op(t, decide.OpRenew, r2.Grant.Permit, n, ttl, c.ttl)
		if err != nil || !g.Done || g.Expiry != f.now()+c.want.Nanoseconds() {
			t.Fatalf("renew %v: %+v, %v; want expiry now+%v", c.ttl, g, err, c.want)
		}
	}
	for _, kind := range []decide.OpKind{decide.OpRelease, decide.OpRenew} {
		if g, err := f.op(t, kind, forged(t), n, ttl, 0); err != nil || g.Done || g.Expiry != 0 {
			t.Fatalf("op %d of an unknown id: %+v, %v; want Done false", kind, g, err)
		}
	}
	if got := f.inFlight(t); got != 1 {
		t.Fatalf("in flight %d, want 1", got)
	}
	f.clk.Advance(3 * time.Second) // r2's renewed 3s pass
	if got := f.inFlight(t); got != 0 {
		t.Fatalf("in flight after expiry %d, want 0", got)
	}
	if g, _ := f.op(t, decide.OpRenew, r2.Grant.Permit, n, ttl, 0); g.Done {
		t.Fatal("renewed an expired permit")
	}
	if got := metrictest.Value(t, f.reg, "weir_permits_total", "limit", "exports", "result", "denied"); got != 1 {
		t.Fatalf("denied counted %v, want 1", got)
	}
	if got := metrictest.Value(t, f.reg, "weir_permits_released_total", "result", "not_held"); got != 2 {
		t.Fatalf("not_held releases counted %v, want 2", got)
	}
}

// All or nothing with a rate key: denied by the rate limit, no permit is
// held (in memory or Redis); denied by permits, the rate key's TAT does
// not move.
func TestOwner_permits_allOrNothingWithRateKey(t *testing.T) {
	f, redis := newPermitPair(t, true, 0)
	rate := gcra.Limit{Interval: time.Second.Nanoseconds(), Burst: 1}
	if _, agg, _, err := f.acquire(t, 5, time.Minute, 1, &rate); err != nil || !agg.Allowed {
		t.Fatalf("first: %+v, %v", agg, err)
	}
	before, _ := redis.Set(concKey)
	r, agg, out, err := f.acquire(t, 5, time.Minute, 1, &rate)
	if err != nil || agg.Allowed || out[1].Allowed || !out[0].Allowed || r.Grant.Permit != nil {
		t.Fatalf("denied by rate: %+v %+v grant %+v, %v", agg, out, r.Grant, err)
	}
	if got := f.inFlight(t); got != 1 {
		t.Fatalf("denied by rate left %d in flight, want 1", got)
	}
	if after, _ := redis.Set(concKey); string(after) != string(before) {
		t.Fatal("denied by rate changed the set in Redis")
	}
	f.clk.Advance(time.Second) // the rate key has room again
	wide := gcra.Limit{Interval: time.Second.Nanoseconds(), Burst: 10}
	tat := f.mem.Get("t1", permitRateKey)
	r, agg, out, err = f.acquire(t, 1, time.Minute, 1, &wide)
	if err != nil || agg.Allowed || out[0].Allowed || r.Grant.Permit != nil {
		t.Fatalf("denied by permits: %+v %+v, %v", agg, out, err)
	}
	if got := f.mem.Get("t1", permitRateKey); got != tat {
		t.Fatalf("denied by permits moved the rate TAT %d -> %d", tat, got)
	}
}

// A group handed to a second owner over one Redis keeps its live permits:
// the N bound holds across the move, and the old token releases there.
func TestOwner_permits_handoffKeepsLivePermits(t *testing.T) {
	a, redis := newPermitPair(t, true, 0)
	b := newPermitOwner(t, "b", a.ring, a.clk, redis, 0)
	const n, ttl = 3, time.Minute
	var toks [][]byte
	for range n {
		r, agg, _, err := a.acquire(t, n, ttl, 1, nil)
		if err != nil || !agg.Allowed {
			t.Fatalf("acquire at a: %+v, %v", agg, err)
		}
		toks = append(toks, r.Grant.Permit)
	}
	a.ring.move("b")
	a.o.Drop(t.Context(), func(string) bool { return true })
	if _, _, _, ok := a.o.Permits("t1", concKey, a.now()); ok {
		t.Fatal("the old owner kept the set after the drop")
	}
	if _, _, _, err := a.acquire(t, n, ttl, 1, nil); reason(err) != "ownership_changing" {
		t.Fatalf("old owner after the move: %v, want ownership_changing", err)
	}
	if _, agg, _, err := b.acquire(t, n, ttl, 1, nil); err != nil || agg.Allowed {
		t.Fatalf("new owner with %d live: %+v, %v; want denied", n, agg, err)
	}
	if g, err := b.op(t, decide.OpRelease, toks[0], n, ttl, 0); err != nil || !g.Done {
		t.Fatalf("release at the new owner: %+v, %v", g, err)
	}
	if _, agg, _, err := b.acquire(t, n, ttl, 1, nil); err != nil || !agg.Allowed {
		t.Fatalf("after a release: %+v, %v", agg, err)
	}
	if _, agg, _, _ := b.acquire(t, n, ttl, 1, nil); agg.Allowed {
		t.Fatal("the new owner admitted beyond N")
	}
}

// Without Redis, a new owner (a crash, or a move) starts empty.
func TestOwner_permits_crashWithoutRedisStartsEmpty(t *testing.T) {
	a, _ := newPermitPair(t, false, 0)
	for range 2 {
		a.acquire(t, 2, time.Minute, 1, nil)
	}
	if _, agg, _, _ := a.acquire(t, 2, time.Minute, 1, nil); agg.Allowed {
		t.Fatal("admitted beyond N")
	}
	b := newPermitOwner(t, "a", a.ring, a.clk, nil, 0) // the restarted process
	if _, agg, _, err := b.acquire(t, 2, time.Minute, 2, nil); err != nil || !agg.Allowed {
		t.Fatalf("restarted owner without Redis: %+v, %v; want admitted (empty)", agg, err)
	}
}

// A TAT under a concurrency key (its limit was a rate limit) reads as an
// empty set; other bytes are a load error that changes nothing.
func TestOwner_permits_loadReadsTATAsEmptyAndRefusesCorruptBytes(t *testing.T) {
	f, redis := newPermitPair(t, true, 0)
	if err := redis.StoreTATs(t.Context(), []redisbackend.TAT{{Key: concKey, TAT: f.now() + int64(time.Hour), Now: f.now()}}); err != nil {
		t.Fatal(err)
	}
	if _, agg, _, err := f.acquire(t, 1, time.Minute, 1, nil); err != nil || !agg.Allowed {
		t.Fatalf("over a TAT: %+v, %v; want admitted", agg, err)
	}
	g, redis2 := newPermitPair(t, true, 0)
	redis2.PutRaw(concKey, []byte("\x01not a set"), time.Hour)
	if _, _, _, err := g.acquire(t, 1, time.Minute, 1, nil); reason(err) != "state_load_failed" {
		t.Fatalf("over corrupt bytes: %v, want state_load_failed", err)
	}
	if _, _, _, ok := g.o.Permits("t1", concKey, g.now()); ok {
		t.Fatal("a failed load left a set in memory")
	}
	if raw, _ := redis2.Set(concKey); string(raw) != "\x01not a set" {
		t.Fatalf("the corrupt value was overwritten: %q", raw)
	}
}

// A write-through that fails rolls the permit back and answers
// redis_unavailable; a release whose write fails stays released.
func TestOwner_permits_writeThroughFailureRollsBack(t *testing.T) {
	f, redis := newPermitPair(t, true, 0)
	redis.FailNext(redistest.OpStoreSets, 1, redistest.Refused())
	r, _, _, err := f.acquire(t, 1, time.Minute, 1, nil)
	if reason(err) != "redis_unavailable" || r.Grant.Permit != nil {
		t.Fatalf("failed write-through: %v grant %+v, want redis_unavailable and no token", err, r.Grant)
	}
	if got := f.inFlight(t); got != 0 {
		t.Fatalf("a failed write-through left %d in flight", got)
	}
	r, agg, _, err := f.acquire(t, 1, time.Minute, 1, nil)
	if err != nil || !agg.Allowed {
		t.Fatalf("after the failure: %+v, %v", agg, err)
	}
	redis.FailNext(redistest.OpStoreSets, 1, redistest.Refused())
	if g, err := f.op(t, decide.OpRelease, r.Grant.Permit, 1, time.Minute, 0); err != nil || !g.Done {
		t.Fatalf("release over a failed write: %+v, %v; want done", g, err)
	}
	if got := f.inFlight(t); got != 0 {
		t.Fatalf("release undone by a failed write: %d in flight", got)
	}
	if got := metrictest.Value(t, f.reg, "weir_permit_store_errors_total"); got != 2 {
		t.Fatalf("store errors counted %v, want 2", got)
	}
}

// Ops and acquires on a group this node does not own get the usual
// not-owner answers; strict requests with permits are refused.
func TestOwner_permits_notOwnedAndStrict(t *testing.T) {
	f, _ := newPermitPair(t, true, 0)
	r, _, _, err := f.acquire(t, 2, time.Minute, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.ring.move("b")
	if _, err := f.op(t, decide.OpRelease, r.Grant.Permit, 2, time.Minute, 0); reason(err) != "ownership_changing" {
		t.Fatalf("release of a group not owned: %v, want ownership_changing", err)
	}
	tk, _ := ticket.Decode(r.Grant.Permit)
	items := []decide.Request{{Group: "t1", Keys: tk.Keys, Limits: []gcra.Limit{{Burst: 2, Interval: int64(time.Minute)}},
		Defs: []*decide.Def{concDef}, Now: f.now(), Op: &decide.Op{Kind: decide.OpRelease, ID: tk.ID}}}
	if res := f.o.HandleDecide(t.Context(), "x", items); res[0].NotOwner != "b" {
		t.Fatalf("forwarded release of a group not owned: %+v, want NotOwner b", res[0])
	}
	f.ring.move("a")
	strict := &decide.Request{Group: "t1", Keys: []string{concKey}, Limits: []gcra.Limit{{Burst: 2, Interval: int64(time.Minute)}},
		Defs: []*decide.Def{concDef}, Cost: 1, Now: f.now(), Strict: true, Grant: &decide.Grant{}}
	if _, err := f.o.Decide(t.Context(), strict, make([]gcra.Result, 1)); err != ErrStrictGrant {
		t.Fatalf("strict with permits: %v, want ErrStrictGrant", err)
	}
	if got := f.inFlight(t); got != 1 {
		t.Fatalf("in flight %d, want 1: refused requests changed nothing", got)
	}
}

// A forwarded acquire answers its Grant in the peer result.
func TestOwner_permits_HandleDecideReturnsGrant(t *testing.T) {
	f, _ := newPermitPair(t, true, 0)
	items := []decide.Request{{Group: "t1", Keys: []string{concKey}, Limits: []gcra.Limit{{Burst: 2, Interval: int64(time.Minute)}},
		Defs: []*decide.Def{concDef}, Cost: 1, Now: f.now()}}
	res := f.o.HandleDecide(t.Context(), "x", items)
	if res[0].Err != nil || res[0].Grant == nil || res[0].Grant.Permit == nil || !res[0].Overall.Allowed || res[0].Grant.InFlight[0] != 1 {
		t.Fatalf("forwarded acquire: %+v", res[0])
	}
	if _, err := ticket.Decode(res[0].Grant.Permit); err != nil {
		t.Fatal(err)
	}
}

// Sweep expires permits, counts them, refreshes the live gauge and
// forgets empty sets; the key cap refuses a new key while every set holds
// permits and evicts empty ones.
func TestOwner_permits_sweepAndCap(t *testing.T) {
	f, _ := newPermitPair(t, true, 1)
	if _, agg, _, err := f.acquire(t, 3, time.Second, 2, nil); err != nil || !agg.Allowed {
		t.Fatal(agg, err)
	}
	f.o.Sweep(f.now())
	if got := metrictest.Value(t, f.reg, "weir_permits_live", "limit", "exports"); got != 2 {
		t.Fatalf("live %v, want 2", got)
	}
	other := &decide.Request{Group: "t2", Keys: []string{"weir:{t2}:exports:t2"}, Limits: []gcra.Limit{{Burst: 3, Interval: int64(time.Second)}},
		Defs: []*decide.Def{concDef}, Cost: 1, Now: f.now(), Grant: &decide.Grant{}}
	if _, err := f.o.Decide(t.Context(), other, make([]gcra.Result, 1)); reason(err) != ReasonMemoryFull {
		t.Fatalf("a second key over a cap of 1: %v, want memory_full", err)
	}
	f.clk.Advance(time.Second)
	if n := f.o.Sweep(f.now()); n < 1 {
		t.Fatalf("sweep forgot %d sets, want the emptied one", n)
	}
	if got := metrictest.Value(t, f.reg, "weir_permits_expired_total", "limit", "exports"); got != 1 {
		t.Fatalf("expired %v, want 1", got)
	}
	if got := metrictest.Value(t, f.reg, "weir_permits_live", "limit", "exports"); got != 0 {
		t.Fatalf("live after expiry %v, want 0", got)
	}
	other.Now = f.now()
	if _, err := f.o.Decide(t.Context(), other, make([]gcra.Result, 1)); err != nil {
		t.Fatalf("a second key once the first was swept: %v", err)
	}
}

// The dispatch costs a plain decision nothing: Decide allocates exactly
// what decideLocal does.
func TestOwner_Decide_plainPathAllocatesNothingNew(t *testing.T) {
	f, _ := newPermitPair(t, false, 0)
	r := &decide.Request{Group: "t1", Keys: []string{permitRateKey}, Limits: []gcra.Limit{{Interval: 1, Burst: 1 << 40}},
		Defs: []*decide.Def{permitRateDef}, Cost: 1, Now: f.now()}
	out := make([]gcra.Result, 1)
	ctx := t.Context()
	viaDecide := testing.AllocsPerRun(200, func() { f.o.Decide(ctx, r, out) })
	direct := testing.AllocsPerRun(200, func() { f.o.decideLocal(ctx, r, out) })
	if viaDecide != direct {
		t.Fatalf("Decide allocates %v per plain decision, decideLocal %v", viaDecide, direct)
	}
	t.Logf("allocs per plain decision: %v", viaDecide)
}

// Without Redis, an op on a key this owner never used creates no set.
func TestOwner_permits_opOnAbsentKeyCreatesNothing(t *testing.T) {
	f, _ := newPermitPair(t, false, 0)
	for _, kind := range []decide.OpKind{decide.OpRelease, decide.OpRenew} {
		if g, err := f.op(t, kind, forged(t), 2, time.Minute, 0); err != nil || g.Done {
			t.Fatalf("op %d: %+v, %v", kind, g, err)
		}
	}
	if f.o.permits.len() != 0 {
		t.Fatalf("%d sets created by ops on an unknown key", f.o.permits.len())
	}
}

// At the cap, a shard is scanned for empty sets at most once a
// millisecond: a flood of new keys cannot make every insert walk the
// shard under its lock. An insert within the millisecond after a scan is
// refused, one after it scans again and evicts what emptied since.
func TestPermitTable_evictionScansAShardOncePerMillisecond(t *testing.T) {
	mem := memstore.New(memstore.DefaultConfig())
	tab := newPermitTable(1)
	const now = int64(1_700_000_000_000_000_000)
	l := permit.Limit{MaxInFlight: 1, TTL: int64(500 * time.Microsecond)}
	var set permit.Set
	if _, err := set.Acquire(now, l, permit.ID{1}, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := tab.insertAt(mem, mem.Epoch(), "g", "k1", &set, now); err != nil {
		t.Fatal(err)
	}
	if _, err := tab.insertAt(mem, mem.Epoch(), "g", "k2", nil, now); !errors.Is(err, memstore.ErrFull) {
		t.Fatalf("a second key while the first holds a permit: %v, want ErrFull", err)
	}
	at := now + int64(600*time.Microsecond) // k1's permit has expired, within a millisecond of the scan
	if _, err := tab.insertAt(mem, mem.Epoch(), "g", "k2", nil, at); !errors.Is(err, memstore.ErrFull) {
		t.Fatalf("within a millisecond of the last scan: %v, want ErrFull without a scan", err)
	}
	at = now + int64(time.Millisecond)
	if _, err := tab.insertAt(mem, mem.Epoch(), "g", "k2", nil, at); err != nil {
		t.Fatalf("a millisecond after the scan, with k1 empty: %v", err)
	}
	if tab.get("g", "k1") != nil {
		t.Fatal("k1 was not evicted")
	}
}
