package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// exactQuantile is the reference: the value of rank ceil(q*n) of sorted.
func exactQuantile(sorted []int64, q float64) int64 {
	rank := int(math.Ceil(q * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

func TestBucketOf_rangesTileTheLine(t *testing.T) {
	values := []int64{0, 1, 127, 128, 255, 256, 257, 511, 512, 1000, 1 << 20, 123456789, math.MaxInt64 - 1, math.MaxInt64}
	for _, v := range values {
		i := bucketOf(v)
		lo, width := bucketRange(i)
		if v < lo || v-lo >= width {
			t.Errorf("value %d in bucket %d = [%d, %d+%d)", v, i, lo, lo, width)
		}
		if i >= numBuckets {
			t.Errorf("value %d maps to bucket %d beyond %d", v, i, numBuckets)
		}
		if lo >= 2*subBuckets && float64(width)/float64(lo) > 1.0/subBuckets {
			t.Errorf("bucket %d too wide: %d at %d", i, width, lo)
		}
	}
	// Consecutive buckets meet exactly.
	for i := 1; i < numBuckets; i++ {
		plo, pw := bucketRange(i - 1)
		lo, _ := bucketRange(i)
		if plo+pw != lo {
			t.Fatalf("bucket %d ends at %d but bucket %d starts at %d", i-1, plo+pw, i, lo)
		}
	}
}

func TestHistogram_Quantile_knownData(t *testing.T) {
	h := newHistogram()
	for v := int64(1); v <= 10000; v++ {
		h.Record(v)
	}
	tests := []struct {
		q    float64
		want int64
	}{{0.5, 5000}, {0.9, 9000}, {0.99, 9900}, {0.999, 9990}, {1, 10000}, {0, 1}}
	for _, tt := range tests {
		got := h.Quantile(tt.q)
		if rel := math.Abs(float64(got-tt.want)) / float64(tt.want); rel > 0.01 {
			t.Errorf("Quantile(%v) = %d, want %d within 1%% (off by %.2f%%)", tt.q, got, tt.want, rel*100)
		}
	}
	if h.Count() != 10000 || h.Max() != 10000 || h.Mean() != 5000.5 {
		t.Errorf("count %d max %d mean %v", h.Count(), h.Max(), h.Mean())
	}
}

func TestHistogram_Quantile_smallValuesExact(t *testing.T) {
	h := newHistogram()
	var data []int64
	for v := int64(0); v < 2*subBuckets; v++ {
		for range v % 7 {
			h.Record(v)
			data = append(data, v)
		}
	}
	for _, q := range []float64{0.01, 0.25, 0.5, 0.75, 0.9, 0.99, 1} {
		if got, want := h.Quantile(q), exactQuantile(data, q); got != want {
			t.Errorf("Quantile(%v) = %d, want exactly %d", q, got, want)
		}
	}
}

func TestHistogram_Quantile_matchesSortWithinOnePercent(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dists := map[string]func() int64{
		"uniform 1us-10ms": func() int64 { return 1000 + rng.Int64N(10_000_000) },
		"lognormal":        func() int64 { return int64(math.Exp(rng.NormFloat64()*1.5 + 12)) },
		"bimodal":          func() int64 { return []int64{200_000, 50_000_000}[rng.IntN(2)] + rng.Int64N(1000) },
		"heavy tail":       func() int64 { return int64(1e5 / math.Pow(1-rng.Float64(), 1.5)) },
	}
	for name, next := range dists {
		t.Run(name, func(t *testing.T) {
			h := newHistogram()
			data := make([]int64, 100_000)
			for i := range data {
				data[i] = next()
				h.Record(data[i])
			}
			slices.Sort(data)
			for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 0.9999, 1} {
				got, want := h.Quantile(q), exactQuantile(data, q)
				if rel := math.Abs(float64(got-want)) / float64(want); rel > 0.01 {
					t.Errorf("Quantile(%v) = %d, exact %d: off by %.3f%%", q, got, want, rel*100)
				}
			}
			if h.Max() != data[len(data)-1] {
				t.Errorf("Max = %d, want %d", h.Max(), data[len(data)-1])
			}
		})
	}
}

func TestHistogram_Merge_equalsRecordingAll(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	all, a, b := newHistogram(), newHistogram(), newHistogram()
	for i := range 10_000 {
		v := rng.Int64N(1 << 30)
		all.Record(v)
		if i%3 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
	}
	merged := newHistogram()
	merged.Merge(a)
	merged.Merge(b)
	merged.Merge(newHistogram()) // empty merges change nothing
	for _, q := range []float64{0.1, 0.5, 0.99, 1} {
		if merged.Quantile(q) != all.Quantile(q) {
			t.Errorf("Quantile(%v): merged %d, direct %d", q, merged.Quantile(q), all.Quantile(q))
		}
	}
	if merged.Count() != all.Count() || merged.Max() != all.Max() {
		t.Errorf("merged count/max %d/%d, direct %d/%d", merged.Count(), merged.Max(), all.Count(), all.Max())
	}
}

func TestHistogram_edgeCases(t *testing.T) {
	h := newHistogram()
	if h.Quantile(0.5) != 0 || h.Mean() != 0 || h.Max() != 0 {
		t.Error("empty histogram should report zeros")
	}
	h.Record(-5) // clock skew must not corrupt the histogram
	h.Record(math.MaxInt64)
	if h.Quantile(0.5) != 0 || h.Quantile(1) != math.MaxInt64 {
		t.Errorf("p50 %d p100 %d", h.Quantile(0.5), h.Quantile(1))
	}
}
