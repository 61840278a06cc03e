package breaker

import (
	"testing"
	"time"
)

func BenchmarkBreaker_Allow_closed(b *testing.B) {
	br := newBreaker(b, DefaultConfig(), nil)
	b.ReportAllocs()
	for b.Loop() {
		done, err := br.Allow()
		if err != nil {
			b.Fatal(err)
		}
		done(nil)
	}
}

func BenchmarkBreaker_Allow_closedParallel(b *testing.B) {
	br := newBreaker(b, DefaultConfig(), nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			done, err := br.Allow()
			if err != nil {
				b.Error(err)
				return
			}
			done(nil)
		}
	})
}

func BenchmarkBreaker_Allow_open(b *testing.B) {
	c := DefaultConfig()
	c.OpenFor = time.Hour
	br := newBreaker(b, c, nil)
	for range c.ConsecutiveFailures {
		done, _ := br.Allow()
		done(errDep)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := br.Allow(); err == nil {
			b.Fatal("admitted while open")
		}
	}
}
