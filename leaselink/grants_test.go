package leaselink

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/clock/clocktest"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/lease"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/owner"
	"github.com/weirhq/weir/redisbackend"
	"github.com/weirhq/weir/redisbackend/redistest"
	"github.com/weirhq/weir/writebehind"
)

// twinOwner is an owner "a" of every group over redistest's in-memory twin
// of Redis, on a manual clock that starts at the real time.
type twinOwner struct {
	o     *owner.Owner
	redis *redistest.Memory
	clk   *clocktest.Manual
}

type ownAll string

func (r ownAll) Owner(string) string { return string(r) }

func newTwinOwner(t *testing.T) *twinOwner {
	t.Helper()
	clk := clocktest.NewManual(time.Now())
	f := &twinOwner{redis: redistest.NewMemory(clk), clk: clk}
	wb, err := writebehind.New(writebehind.DefaultConfig(), f.redis, func() int64 { return clk.Now().UnixNano() }, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	q, err := redisbackend.NewStrictQueue(f.redis, time.Second, 16)
	if err != nil {
		t.Fatal(err)
	}
	cfg := owner.DefaultConfig()
	cfg.LocalName = "a"
	f.o, err = owner.New(cfg, owner.Deps{Ring: ownAll("a"), Mem: memstore.New(memstore.DefaultConfig()), Redis: f.redis, Strict: q, WriteBehind: wb, Clock: clk}, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// A grant whose write-through fails is not given: the answer is an error
// and no units stay out on the ledger.
func TestGrants_HandleLease_failedWriteThroughRevokes(t *testing.T) {
	f := newTwinOwner(t)
	gcfg := GrantConfig{Grantor: lease.DefaultGrantorConfig(), WriteTimeout: time.Second}
	gcfg.Grantor.Name = "a#1"
	g, err := NewGrants(gcfg, f.o, f.clk, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.o.EnableLeases(g)
	hot := gcra.Limit{Interval: 1_000_000, Burst: 100}
	item := lease.Request{Peer: "b#1", Group: "t1", Key: "weir:{t1}:hot:t1", Limit: hot, Terms: lease.Terms{Max: 20, TTL: 250 * time.Millisecond}, Label: "hot", Demand: 1e6}
	f.redis.FailNext(redistest.OpStore, 1, redistest.Refused())
	ans := g.HandleLease(t.Context(), "b#1", lease.Refresh{Seq: 1, Items: []lease.Request{item}})
	if ans[0].Err == nil || g.Leased("t1", item.Key) != 0 {
		t.Fatalf("answer %+v, %d units out; want an error and none out", ans[0], g.Leased("t1", item.Key))
	}
	ans = g.HandleLease(t.Context(), "b#1", lease.Refresh{Seq: 2, Items: []lease.Request{item}})
	if ans[0].Err != nil || ans[0].Outcome != lease.Granted || g.Leased("t1", item.Key) != ans[0].Units {
		t.Fatalf("second refresh: %+v, %d out", ans[0], g.Leased("t1", item.Key))
	}
	if tat, ok := f.redis.TAT(item.Key); !ok || tat < ans[0].TAT {
		t.Fatalf("Redis holds %d (%v) for a grant whose TAT is %d: the grant was not written through", tat, ok, ans[0].TAT)
	}
}

// A scheduled grant at a saturated key: its units are for later, the TAT
// it writes through lies beyond now + the span, and within lease.Reach.
func TestGrants_HandleLease_scheduledGrantWritesWithinTheReach(t *testing.T) {
	f := newTwinOwner(t)
	gcfg := GrantConfig{Grantor: lease.DefaultGrantorConfig(), WriteTimeout: time.Second}
	gcfg.Grantor.Name = "a#1"
	g, err := NewGrants(gcfg, f.o, f.clk, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.o.EnableLeases(g)
	hot := gcra.Limit{Interval: 1_000_000, Burst: 100}
	terms := lease.Terms{Max: 10, TTL: 250 * time.Millisecond}
	item := lease.Request{Peer: "b#1", Group: "t1", Key: "weir:{t1}:hot:t1", Limit: hot, Terms: terms, Label: "hot", Demand: 1e6, Scheduled: true}
	now := f.clk.Now().UnixNano()
	if err := f.redis.StoreTATs(t.Context(), []redisbackend.TAT{{Key: item.Key, TAT: now + hot.Span(), Now: now}}); err != nil {
		t.Fatal(err)
	}
	a := g.HandleLease(t.Context(), "b#1", lease.Refresh{Seq: 1, Items: []lease.Request{item}})[0]
	if a.Err != nil || a.Outcome != lease.Granted || a.Units != 10 || a.Start != hot.Interval || a.Spacing != hot.Interval {
		t.Fatalf("answer %+v, want 10 units from 1ms, 1ms apart", a)
	}
	tat, ok := f.redis.TAT(item.Key)
	if reach := lease.Reach(hot, terms, gcfg.Grantor.Grace); !ok || tat < a.TAT || tat-now <= hot.Span() || tat-now > reach {
		t.Fatalf("Redis holds %d ahead (%v) for a grant whose TAT is %d ahead; want beyond the span %d, within the reach %d",
			tat-now, ok, a.TAT-now, hot.Span(), reach)
	}
}
