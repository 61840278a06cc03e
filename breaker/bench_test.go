package breaker

import (
	"testing"
	"time"
)

func BenchmarkBreaker_Allow_closed(b *testing.B) {
	br := New("r", DefaultConfig(), time.Now, nil)
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
	br := New("r", DefaultConfig(), time.Now, nil)
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
	br := New("r", DefaultConfig(), newFakeClock().now, nil)
	for range DefaultConfig().FailureThreshold {
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
