package owner

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/clock/clocktest"
	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/metrictest"
	"github.com/weirhq/weir/redisbackend"
	"github.com/weirhq/weir/redisbackend/redistest"
	"github.com/weirhq/weir/writebehind"
)

// Unit tests of the owner's state machine over redistest's in-memory twin
// of Redis and a manual clock: no redis-server, no sleeping.

// movableRing owns every group at one node, which a test may change.
type movableRing struct {
	mu    sync.Mutex
	owner string
}

func (r *movableRing) Owner(string) string { r.mu.Lock(); defer r.mu.Unlock(); return r.owner }
func (r *movableRing) move(to string)      { r.mu.Lock(); r.owner = to; r.mu.Unlock() }

var (
	userLimit   = gcra.Limit{Interval: 20_000_000, Burst: 5} // 50/s
	tenantLimit = gcra.Limit{Interval: 10_000_000, Burst: 20}
)

// twinOwner is one owner "a" over a twin Redis, on a manual clock that is
// also the twin's (Redis TIME) and the requests' time base. The clock
// starts at the real time: the owner's deadline arithmetic (replyContext)
// compares it with contexts' deadlines, which are real.
type twinOwner struct {
	o     *Owner
	mem   *memstore.Store
	redis *redistest.Memory
	wb    *writebehind.Writer
	ring  *movableRing
	clk   *clocktest.Manual
	reg   *prometheus.Registry
}

func newTwinOwner(t *testing.T) *twinOwner {
	t.Helper()
	clk := clocktest.NewManual(time.Now())
	f := &twinOwner{mem: memstore.New(memstore.DefaultConfig()), redis: redistest.NewMemory(clk), ring: &movableRing{owner: "a"}, clk: clk, reg: prometheus.NewRegistry()}
	var err error
	f.wb, err = writebehind.New(writebehind.DefaultConfig(), f.redis, func() int64 { return clk.Now().UnixNano() }, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	q, err := redisbackend.NewStrictQueue(f.redis, time.Second, 16)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.LocalName = "a"
	cfg.LoadTimeout = time.Second
	f.o, err = New(cfg, Deps{Ring: f.ring, Mem: f.mem, Redis: f.redis, Strict: q, WriteBehind: f.wb, Clock: clk}, nil, f.reg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *twinOwner) now() int64 { return f.clk.Now().UnixNano() }

// userRequest is tenant t1's per-user and per-tenant composite at now.
func (f *twinOwner) userRequest(user string) *decide.Request {
	return &decide.Request{Group: "t1", Keys: []string{"weir:{t1}:per-user:t1:" + user, "weir:{t1}:per-tenant:t1"},
		Limits: []gcra.Limit{userLimit, tenantLimit}, Cost: 1, Now: f.now()}
}

func (f *twinOwner) decide(t *testing.T, r *decide.Request) (gcra.Result, error) {
	t.Helper()
	return f.o.Decide(t.Context(), r, make([]gcra.Result, len(r.Keys)))
}

func reason(err error) string {
	if ue, ok := errors.AsType[*limiter.UnavailableError](err); ok {
		return ue.Reason
	}
	return ""
}

// A first touch loads the keys' TATs from Redis, so a key another owner
// spent is not rested here; a failed load falls back (state_load_failed)
// and leaves nothing behind.
func TestOwner_Decide_firstTouchLoadsFromRedis(t *testing.T) {
	f := newTwinOwner(t)
	r := f.userRequest("u1")
	spent := f.now() + userLimit.Span() // the whole burst, spent elsewhere
	if err := f.redis.StoreTATs(t.Context(), []redisbackend.TAT{{Key: r.Keys[0], TAT: spent, Now: f.now()}}); err != nil {
		t.Fatal(err)
	}
	f.redis.FailNext(redistest.OpLoad, 1, redistest.Refused())
	if _, err := f.decide(t, r); reason(err) != "state_load_failed" {
		t.Fatalf("decision over a failed load: %v, want state_load_failed", err)
	}
	if f.mem.Has("t1", r.Keys[0]) || f.mem.Has("t1", r.Keys[1]) {
		t.Fatal("a failed load left keys in memory")
	}
	agg, err := f.decide(t, r)
	if err != nil || agg.Allowed {
		t.Fatalf("decision after the load: %+v, %v; want denied (spent in Redis)", agg, err)
	}
	if got := f.redis.Calls(redistest.OpLoad); got != 2 {
		t.Fatalf("%d loads, want 2 (the failed one and one more)", got)
	}
	if _, err := f.decide(t, r); err != nil || f.redis.Calls(redistest.OpLoad) != 2 {
		t.Fatalf("a held key was loaded again: %v, %d loads", err, f.redis.Calls(redistest.OpLoad))
	}
}

// A hand-off that lands while an owner is loading a key must not let the
// load re-create the key on the node that just gave the group away, nor
// let the decision be made there: the decision ends with the retryable
// ownership_changing fallback and the key stays dropped. (The twin holds
// the load; the old test overwrote a loadTATs field.)
func TestOwner_handoffDuringLoad_doesNotRecreateTheKey(t *testing.T) {
	f := newTwinOwner(t)
	release := f.redis.Block(redistest.OpLoad)
	defer release()
	r := f.userRequest("u1")
	done := make(chan error, 1)
	go func() { _, err := f.o.Decide(context.Background(), r, make([]gcra.Result, 2)); done <- err }()
	if err := f.redis.WaitBlocked(t.Context(), redistest.OpLoad, 1); err != nil {
		t.Fatal(err)
	}
	f.ring.move("b") // the ring changes while the load is in flight...
	f.o.Drop(t.Context(), func(string) bool { return true })
	release() // ...and the load answers after the drop
	if err := <-done; reason(err) != "ownership_changing" {
		t.Fatalf("decision across a hand-off: %v, want ownership_changing", err)
	}
	for _, k := range r.Keys {
		if f.mem.Has("t1", k) {
			t.Fatalf("%s is held on the node that handed its group off", k)
		}
	}
	// Owning it again, the owner loads and decides as usual.
	f.ring.move("a")
	if agg, err := f.decide(t, f.userRequest("u1")); err != nil || !agg.Allowed {
		t.Fatalf("after ownership returned: %+v, %v", agg, err)
	}
}

// An owner frozen past the freeze limit must not decide from its memory:
// a decision finds the freeze and falls back at once ("thawing"), the next
// Beat (the caller's heartbeat) reloads, and the next decision sees what
// Redis holds. The manual clock makes the freeze: nothing sleeps.
func TestOwner_Beat_frozenOwnerThawsOffTheRequestPath(t *testing.T) {
	f := newTwinOwner(t)
	f.o.StartHeartbeat()
	r := f.userRequest("u1")
	if agg, err := f.decide(t, r); err != nil || !agg.Allowed {
		t.Fatalf("first decision: %+v, %v", agg, err)
	}
	f.clk.Advance(DefaultConfig().FreezeLimit + time.Millisecond) // the process slept
	spent := f.now() + userLimit.Span()
	if err := f.redis.StoreTATs(t.Context(), []redisbackend.TAT{{Key: r.Keys[0], TAT: spent, Now: f.now()}}); err != nil {
		t.Fatal(err) // what peers decided meanwhile
	}
	if _, err := f.decide(t, f.userRequest("u1")); reason(err) != "thawing" {
		t.Fatalf("decision of a frozen owner: %v, want the thawing fallback", err)
	}
	select {
	case <-f.o.ThawRequests():
	default:
		t.Fatal("the decision did not ask the heartbeat to thaw")
	}
	f.o.Beat(t.Context())
	if f.o.Thawing() {
		t.Fatal("still thawing after a beat")
	}
	agg, err := f.decide(t, f.userRequest("u1"))
	if err != nil || agg.Allowed {
		t.Fatalf("thawed owner: %+v, %v; want denied from Redis's TAT, not its stale memory", agg, err)
	}
	if got := metrictest.Value(t, f.reg, "weir_freezes_total"); got != 1 {
		t.Fatalf("weir_freezes_total = %v, want 1", got)
	}
	// Beats on time find no freeze.
	f.clk.Advance(BeatEvery)
	f.o.Beat(t.Context())
	if _, err := f.decide(t, f.userRequest("u2")); err != nil {
		t.Fatalf("after an on-time beat: %v", err)
	}
}

// Strict requests go to Redis (the twin's script) and are exact; a Redis
// that fails them falls back with redis_unavailable.
func TestOwner_Decide_strictIsDecidedByRedis(t *testing.T) {
	f := newTwinOwner(t)
	acct := gcra.Limit{Interval: int64(time.Minute), Burst: 5}
	r := &decide.Request{Group: "o1", Keys: []string{"weir:{o1}:strict-account:o1:a1"}, Limits: []gcra.Limit{acct}, Cost: 1, Strict: true}
	admitted := 0
	for range 8 {
		agg, err := f.decide(t, r)
		if err != nil {
			t.Fatal(err)
		}
		if agg.Allowed {
			admitted++
		}
	}
	if admitted != 5 || f.mem.Has("o1", r.Keys[0]) {
		t.Fatalf("admitted %d of a burst of 5 (held in memory: %v)", admitted, f.mem.Has("o1", r.Keys[0]))
	}
	f.redis.FailNext(redistest.OpDecide, 1, redistest.Refused())
	if _, err := f.decide(t, r); reason(err) != "redis_unavailable" {
		t.Fatalf("strict over a failing Redis: %v, want redis_unavailable", err)
	}
}

// A slow Redis fails only the forwarded items that need it, before the
// sender's deadline; what the owner holds in memory is decided.
func TestOwner_HandleDecide_slowRedisFailsOnlyItsItems(t *testing.T) {
	f := newTwinOwner(t)
	if _, err := f.decide(t, f.userRequest("u1")); err != nil {
		t.Fatal(err)
	}
	release := f.redis.Block(redistest.OpLoad)
	defer release()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	rs := f.o.HandleDecide(ctx, "b", []decide.Request{*f.userRequest("cold"), *f.userRequest("u1")})
	if ctx.Err() != nil {
		t.Fatal("the owner answered after the sender's deadline")
	}
	if rs[0].Err == nil || rs[0].Reason != "state_load_failed" {
		t.Fatalf("the item that needed Redis: %+v, want state_load_failed", rs[0])
	}
	if rs[1].Err != nil || !rs[1].Overall.Allowed {
		t.Fatalf("the item held in memory: %+v, want decided", rs[1])
	}
}
