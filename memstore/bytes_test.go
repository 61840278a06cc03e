package memstore

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/weirhq/weir/gcra"
)

// heapBytes returns the live heap after a full collection.
func heapBytes() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkStore_bytesPerKey reports the heap a held key costs
// (bytes/key), key strings included, as they look in production
// ("weir:{tenant}:limit:tenant:user"), and what stays after a sweep frees
// them all (retained-bytes/key). One op inserts N keys, one per group.
func BenchmarkStore_bytesPerKey(b *testing.B) {
	const n = 200_000
	lim := []gcra.Limit{{Interval: 10_000, Burst: 10}}
	var out [1]gcra.Result
	ctx := context.Background()
	for b.Loop() {
		base := heapBytes()
		s := New(DefaultConfig())
		for i := range n {
			group := fmt.Sprint("tenant-", i)
			key := fmt.Sprintf("weir:{%s}:per-user:%s:u1", group, group)
			if _, err := s.Decide(ctx, group, []string{key}, lim, 1, 1_000_000, out[:]); err != nil {
				b.Fatal(err)
			}
		}
		held := heapBytes()
		s.Sweep(1 << 40)
		swept := heapBytes()
		b.ReportMetric(float64(held-base)/n, "bytes/key")
		b.ReportMetric(float64(int64(swept)-int64(base))/n, "retained-bytes/key")
		runtime.KeepAlive(s)
	}
}

func TestStore_SweepFunc_shrinkKeepsTheLiveKeys(t *testing.T) {
	s := New(Config{Shards: 1})
	for i := range 1000 {
		s.Put("g", fmt.Sprint("k", i), int64(i+1))
	}
	var swept int
	if n := s.SweepFunc(900, func(string) { swept++ }); n != 900 || swept != 900 {
		t.Fatalf("swept %d (callback %d), want 900", n, swept)
	}
	if s.shards[0].peak != 100 {
		t.Fatalf("peak %d after the shrink, want 100", s.shards[0].peak)
	}
	for i := 900; i < 1000; i++ {
		if got := s.Get("g", fmt.Sprint("k", i)); got != int64(i+1) {
			t.Fatalf("k%d = %d after the shrink, want %d", i, got, i+1)
		}
	}
	if s.Len() != 100 {
		t.Fatalf("%d keys held, want 100", s.Len())
	}
}
