package owner

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/clock/clocktest"
	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/redisbackend"
	"github.com/weirhq/weir/redisbackend/redistest"
	"github.com/weirhq/weir/writebehind"
)

func acquireReq(now int64, n int64) *decide.Request {
	return &decide.Request{Group: "t1", Keys: []string{concKey}, Limits: []gcra.Limit{{Burst: n, Interval: int64(time.Minute)}},
		Defs: []*decide.Def{concDef}, Cost: 1, Now: now, Grant: &decide.Grant{}}
}

// A first use whose load answers after a hand-off dropped the group
// answers ownership_changing and leaves no set behind.
func TestOwner_permits_dropDuringLoad(t *testing.T) {
	f, redis := newPermitPair(t, true, 0)
	release := redis.Block(redistest.OpLoadSets)
	defer release()
	done := make(chan error, 1)
	go func() {
		_, err := f.o.Decide(context.Background(), acquireReq(f.now(), 2), make([]gcra.Result, 1))
		done <- err
	}()
	if err := redis.WaitBlocked(t.Context(), redistest.OpLoadSets, 1); err != nil {
		t.Fatal(err)
	}
	f.ring.move("b")
	f.o.Drop(t.Context(), func(string) bool { return true })
	release()
	if err := <-done; reason(err) != "ownership_changing" {
		t.Fatalf("acquire across a hand-off: %v, want ownership_changing", err)
	}
	if _, _, _, ok := f.o.Permits("t1", concKey, f.now()); ok {
		t.Fatal("a set was created on the node that handed its group off")
	}
	if _, ok := redis.Set(concKey); ok {
		t.Fatal("the refused acquire reached Redis")
	}
}

// An acquire that holds a set across its write-through finishes before a
// drop of that set: the new owner loads its permit, so N holds across the
// move; a later request at the old owner answers ownership_changing.
func TestOwner_permits_dropWaitsForWriteThrough(t *testing.T) {
	a, redis := newPermitPair(t, true, 0)
	b := newPermitOwner(t, "b", a.ring, a.clk, redis, 0)
	if _, agg, _, err := a.acquire(t, 2, time.Minute, 1, nil); err != nil || !agg.Allowed {
		t.Fatal(agg, err)
	}
	release := redis.Block(redistest.OpStoreSets)
	defer release()
	acq := make(chan error, 1)
	go func() {
		_, err := a.o.Decide(context.Background(), acquireReq(a.now(), 2), make([]gcra.Result, 1))
		acq <- err
	}()
	if err := redis.WaitBlocked(t.Context(), redistest.OpStoreSets, 1); err != nil {
		t.Fatal(err)
	}
	a.ring.move("b")
	dropped := make(chan struct{})
	go func() { a.o.Drop(context.Background(), func(string) bool { return true }); close(dropped) }()
	select {
	case <-dropped:
		t.Fatal("the drop did not wait for the write-through holding the set")
	case <-time.After(20 * time.Millisecond):
	}
	release()
	if err := <-acq; err != nil {
		t.Fatalf("the acquire in flight: %v", err)
	}
	<-dropped
	if _, agg, _, err := b.acquire(t, 2, time.Minute, 1, nil); err != nil || agg.Allowed {
		t.Fatalf("new owner with 2 of 2 held: %+v, %v; want denied", agg, err)
	}
	if _, _, _, err := a.acquire(t, 2, time.Minute, 1, nil); reason(err) != "ownership_changing" {
		t.Fatalf("old owner: %v, want ownership_changing", err)
	}
}

// realOwner is an owner named name over a Backend on srv.
func realOwner(t *testing.T, name string, ring *movableRing, srv *redistest.Server) *permitOwner {
	t.Helper()
	cfg := redisbackend.DefaultConfig()
	cfg.Timeout = 5 * time.Second
	be, err := redisbackend.New(srv.Client(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktest.NewManual(time.Now())
	f := &permitOwner{mem: memstore.New(memstore.DefaultConfig()), ring: ring, clk: clk, reg: prometheus.NewRegistry()}
	wb, err := writebehind.New(writebehind.DefaultConfig(), be, func() int64 { return clk.Now().UnixNano() }, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	q, err := redisbackend.NewStrictQueue(be, time.Second, 16)
	if err != nil {
		t.Fatal(err)
	}
	ocfg := DefaultConfig()
	ocfg.LocalName, ocfg.LoadTimeout = name, 5*time.Second
	if f.o, err = New(ocfg, Deps{Ring: ring, Mem: f.mem, Clock: clk, Redis: be, Strict: q, WriteBehind: wb, Permits: be}, nil, f.reg); err != nil {
		t.Fatal(err)
	}
	return f
}

// Over a real redis-server: a hand-off keeps the live permits, a TAT
// under the key reads as empty, and corrupt bytes are a load error.
func TestOwner_permits_realRedis(t *testing.T) {
	srv := redistest.Start(t)
	ring := &movableRing{owner: "a"}
	a, b := realOwner(t, "a", ring, srv), realOwner(t, "b", ring, srv)
	r, agg, _, err := a.acquire(t, 2, time.Minute, 2, nil)
	if err != nil || !agg.Allowed {
		t.Fatal(agg, err)
	}
	pttl, err := srv.Client().PTTL(t.Context(), concKey).Result()
	if err != nil || pttl < 59*time.Second || pttl > time.Minute+2*redisbackend.ExpiryGrace {
		t.Fatalf("stored set's pttl %v, %v; want about ttl + grace", pttl, err)
	}
	ring.move("b")
	a.o.Drop(t.Context(), func(string) bool { return true })
	if _, agg, _, err := b.acquire(t, 2, time.Minute, 1, nil); err != nil || agg.Allowed {
		t.Fatalf("new owner: %+v, %v; want denied (2 of 2 held)", agg, err)
	}
	if g, err := b.op(t, decide.OpRelease, r.Grant.Permit, 2, time.Minute, 0); err != nil || !g.Done {
		t.Fatalf("release at the new owner: %+v, %v", g, err)
	}
	ring.move("a") // back: a loads the released set
	b.o.Drop(t.Context(), func(string) bool { return true })
	if _, agg, _, err := a.acquire(t, 2, time.Minute, 2, nil); err != nil || !agg.Allowed {
		t.Fatalf("after the release, back at a: %+v, %v", agg, err)
	}
	c := realOwner(t, "a", ring, srv) // a restart: empty memory
	if err := srv.Client().Set(t.Context(), concKey, "1234567", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if _, agg, _, err := c.acquire(t, 2, time.Minute, 2, nil); err != nil || !agg.Allowed {
		t.Fatalf("over a TAT: %+v, %v; want admitted", agg, err)
	}
	d := realOwner(t, "a", ring, srv)
	if err := srv.Client().Set(t.Context(), concKey, "\x01\x00corrupt", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := d.acquire(t, 2, time.Minute, 1, nil); reason(err) != "state_load_failed" {
		t.Fatalf("over corrupt bytes: %v, want state_load_failed", err)
	}
}
