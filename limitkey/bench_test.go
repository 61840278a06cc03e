package limitkey_test

import (
	"testing"

	"github.com/weirhq/weir/limitkey"
)

func BenchmarkKey(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		limitkey.Key("acme", "per-user", "acme", "user-12345")
	}
}

func BenchmarkSplit(b *testing.B) {
	key := limitkey.Key("a}b", "per-user", "a}b", "user:12345")
	b.ReportAllocs()
	for b.Loop() {
		p, _ := limitkey.Split(key)
		p.Value(1)
	}
}
