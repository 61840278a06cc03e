package memstore

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/weirhq/weir/gcra"
)

var ctx = context.Background()

func TestStore_Decide_seedTrace(t *testing.T) {
	s := New(DefaultConfig())
	lim := []gcra.Limit{{Interval: 200_000, Burst: 3}}
	keys := []string{"weir:{t}:x"}
	out := make([]gcra.Result, 1)
	want := []struct {
		now     int64
		allowed bool
		retry   int64
	}{{0, true, 0}, {0, true, 0}, {0, true, 0}, {0, false, 200_000}, {250_000, true, 0}, {250_000, false, 150_000}}
	for i, w := range want {
		agg, err := s.Decide(ctx, "t", keys, lim, 1, w.now, out)
		if err != nil {
			t.Fatal(err)
		}
		if agg.Allowed != w.allowed || agg.RetryAfter != w.retry {
			t.Fatalf("step %d: %+v, want allowed=%v retry=%d", i, agg, w.allowed, w.retry)
		}
	}
}

func TestStore_Decide_compositeAllOrNothing(t *testing.T) {
	s := New(DefaultConfig())
	limits := []gcra.Limit{{Interval: 1000, Burst: 100}, {Interval: 1000, Burst: 1}}
	keys := []string{"weir:{g}:tenant", "weir:{g}:user"}
	out := make([]gcra.Result, 2)
	if agg, _ := s.Decide(ctx, "g", keys, limits, 1, 0, out); !agg.Allowed {
		t.Fatal("first request denied")
	}
	tenantBefore := s.Get("g", keys[0])
	if agg, _ := s.Decide(ctx, "g", keys, limits, 1, 0, out); agg.Allowed {
		t.Fatal("second request should be denied by the user limit")
	}
	if got := s.Get("g", keys[0]); got != tenantBefore {
		t.Fatalf("denied request consumed tenant quota: tat %d -> %d", tenantBefore, got)
	}
}

func TestStore_Decide_cancelledContextConsumesNothing(t *testing.T) {
	s := New(DefaultConfig())
	c, cancel := context.WithCancel(ctx)
	cancel()
	out := make([]gcra.Result, 1)
	if _, err := s.Decide(c, "g", []string{"k"}, []gcra.Limit{{Interval: 1, Burst: 1}}, 1, 10, out); err == nil {
		t.Fatal("cancelled context accepted")
	}
	if s.Len() != 0 {
		t.Fatal("state written")
	}
}

func TestStore_Decide_badInputChangesNothing(t *testing.T) {
	s := New(DefaultConfig())
	out := make([]gcra.Result, 2)
	if _, err := s.Decide(ctx, "g", []string{"a", "b"}, []gcra.Limit{{Interval: 1, Burst: 1}}, 1, 0, out); err == nil {
		t.Fatal("mismatched keys and limits accepted")
	}
	if _, err := s.Decide(ctx, "g", []string{"a"}, []gcra.Limit{{Interval: 1, Burst: 1}}, 0, 0, out); err == nil {
		t.Fatal("cost 0 accepted")
	}
	if s.Len() != 0 {
		t.Fatal("state written")
	}
}

func TestStore_Sweep_removesOnlyRestedKeys(t *testing.T) {
	s := New(Config{Shards: 4})
	lim := []gcra.Limit{{Interval: 100, Burst: 5}}
	out := make([]gcra.Result, 1)
	for i := range 10 {
		g := fmt.Sprint("g", i)
		if _, err := s.Decide(ctx, g, []string{g + ":k"}, lim, 1, int64(i*100), out); err != nil {
			t.Fatal(err)
		}
	}
	// Key i has TAT i*100+100. At now=500 keys 0..4 are rested.
	if n := s.Sweep(500); n != 5 {
		t.Fatalf("swept %d, want 5", n)
	}
	if s.Len() != 5 {
		t.Fatalf("len %d, want 5", s.Len())
	}
	if s.Get("g7", "g7:k") != 800 {
		t.Fatal("live key lost")
	}
}

func TestStore_Put_neverMakesKeyMoreLenient(t *testing.T) {
	s := New(DefaultConfig())
	s.Put("g", "k", 500)
	s.Put("g", "k", 300)
	if got := s.Get("g", "k"); got != 500 {
		t.Fatalf("got %d, want 500", got)
	}
}

func TestConfig_Validate(t *testing.T) {
	for _, n := range []int{0, -1, 3, 100} {
		if (Config{Shards: n}).Validate() == nil {
			t.Errorf("shards %d accepted", n)
		}
	}
	if DefaultConfig().Validate() != nil {
		t.Error("default config invalid")
	}
}

// Many goroutines on one key at one instant: exactly Burst admitted.
func TestStore_Decide_concurrentExactlyBurst(t *testing.T) {
	s := New(DefaultConfig())
	lim := []gcra.Limit{{Interval: 1_000_000, Burst: 50}}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			out := make([]gcra.Result, 1)
			for range 100 {
				if agg, _ := s.Decide(ctx, "g", []string{"k"}, lim, 1, 42, out); agg.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if admitted.Load() != 50 {
		t.Fatalf("admitted %d, want exactly 50", admitted.Load())
	}
}

func BenchmarkStore_Decide(b *testing.B) {
	s := New(DefaultConfig())
	limits := []gcra.Limit{{Interval: 1000, Burst: 200}, {Interval: 20_000, Burst: 20}}
	keys := make([][]string, 1024)
	groups := make([]string, 1024)
	for i := range keys {
		groups[i] = fmt.Sprint("tenant-", i)
		keys[i] = []string{"weir:{" + groups[i] + "}:t", "weir:{" + groups[i] + "}:u"}
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		out := make([]gcra.Result, 2)
		i, now := 0, int64(0)
		for pb.Next() {
			i = (i + 1) & 1023
			now += 100
			s.Decide(ctx, groups[i], keys[i], limits, 1, now, out)
		}
	})
}

func TestStore_HasPutDeleteFunc(t *testing.T) {
	s := New(Config{Shards: 2})
	if s.Has("g", "a") {
		t.Fatal("empty store has a key")
	}
	s.Put("g", "a", 0) // loaded as missing from Redis: now known, rested
	s.Put("h", "b", 7)
	if !s.Has("g", "a") || !s.Has("h", "b") {
		t.Fatal("Put did not hold the keys")
	}
	if n := s.DeleteFunc(func(k string) bool { return k == "a" }); n != 1 {
		t.Fatalf("deleted %d, want 1", n)
	}
	if s.Has("g", "a") || s.Get("h", "b") != 7 {
		t.Fatal("DeleteFunc removed the wrong keys")
	}
}

// Near the top of the int64 range (a forged or corrupt now, a corrupt
// TAT) a key still fills and then denies: its TAT never wraps into a
// negative one that would make it admit everything.
func TestStore_topOfInt64NeverWraps(t *testing.T) {
	s := New(DefaultConfig())
	out := make([]gcra.Result, 1)
	lim := []gcra.Limit{{Interval: 1_000_000, Burst: 5}}
	for i := range 7 {
		agg, err := s.Decide(t.Context(), "g", []string{"k"}, lim, 1, math.MaxInt64-1, out)
		if err != nil || agg.Allowed != (i < 5) {
			t.Fatalf("decision %d: %+v, %v; want 5 admitted, then denials", i, agg, err)
		}
		if tat := s.Get("g", "k"); tat <= 0 {
			t.Fatalf("decision %d: TAT wrapped to %d", i, tat)
		}
	}
	s.Put("g", "j", math.MaxInt64)
	if agg, _ := s.Decide(t.Context(), "g", []string{"j"}, lim, 1, 1_800_000_000_000_000_000, out); agg.Allowed || agg.RetryAfter <= 0 {
		t.Fatalf("a TAT of MaxInt64: %+v, want a denial with a positive wait", agg)
	}
}
