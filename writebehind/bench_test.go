package writebehind_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/weirhq/weir/redisbackend"
)

// nopSink accepts everything at once.
type nopSink struct{}

func (nopSink) StoreTATs(context.Context, []redisbackend.TAT) error { return nil }

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("rl:{tenant%d}:user:%d", i%1000, i)
	}
	return keys
}

// BenchmarkWriter_Mark marks 100k distinct keys from parallel goroutines,
// with the flush loop running against a sink that accepts at once, the
// steady state of a healthy owner.
func BenchmarkWriter_Mark(b *testing.B) {
	keys := benchKeys(100_000)
	w := newWriter(b, testConfig(), nopSink{}, realNow, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	for i, k := range keys { // warm the maps to their steady-state size
		w.Mark(k, int64(i))
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(7919)) // spread goroutines over the key space
		for pb.Next() {
			w.Mark(keys[i%len(keys)], int64(i))
			i++
		}
	})
}

// BenchmarkWriter_Mark_hotKey marks one key from every goroutine: the worst
// case for shard contention.
func BenchmarkWriter_Mark_hotKey(b *testing.B) {
	w := newWriter(b, testConfig(), nopSink{}, realNow, nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var i int64
		for pb.Next() {
			i++
			w.Mark("rl:{hot}:k", i)
		}
	})
}
