package main

import (
	"math"
	"math/bits"
)

// histogram records non-negative int64 values (latencies in nanoseconds) in
// log-linear buckets, in the manner of HdrHistogram: values below 256 get a
// bucket each; above, every power-of-two range [2^k, 2^(k+1)) is split into
// 128 equal buckets. A bucket's width is thus at most 1/128 of its lower
// bound, and reporting its midpoint is within 0.4% of every value in it. The
// whole int64 range fits in 7296 counters (57 KiB), so a run of any length
// costs the same memory and Record is a few instructions.
//
// A histogram is not safe for concurrent use: give each goroutine its own
// and merge them at the end.
type histogram struct {
	counts   []uint64
	total    uint64
	min, max int64
	sum      float64 // for the mean; float64 so that long runs cannot overflow
}

const (
	subBits    = 7
	subBuckets = 1 << subBits // per power of two
	numBuckets = (63-subBits)*subBuckets + subBuckets
)

func newHistogram() *histogram {
	return &histogram{counts: make([]uint64, numBuckets)}
}

// bucketOf returns the index of v's bucket; v must be >= 0.
func bucketOf(v int64) int {
	if v < 2*subBuckets {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - (subBits + 1)
	return shift*subBuckets + int(v>>shift)
}

// bucketRange returns the lowest value of bucket i and the bucket's width.
func bucketRange(i int) (lo, width int64) {
	if i < 2*subBuckets {
		return int64(i), 1
	}
	shift := i/subBuckets - 1
	mantissa := int64(i - shift*subBuckets) // in [128, 256)
	return mantissa << shift, 1 << shift
}

// Record adds one value; negative values count as 0.
func (h *histogram) Record(v int64) {
	v = max(v, 0)
	if h.total == 0 || v < h.min {
		h.min = v
	}
	h.max = max(h.max, v)
	h.counts[bucketOf(v)]++
	h.total++
	h.sum += float64(v)
}

// Merge adds every value recorded in o.
func (h *histogram) Merge(o *histogram) {
	if o.total == 0 {
		return
	}
	if h.total == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	for i, n := range o.counts {
		h.counts[i] += n
	}
	h.total += o.total
	h.sum += o.sum
}

// Count returns the number of recorded values.
func (h *histogram) Count() uint64 { return h.total }

// Max returns the largest recorded value, exactly (0 when empty).
func (h *histogram) Max() int64 { return h.max }

// Mean returns the mean of the recorded values (0 when empty).
func (h *histogram) Mean() float64 {
	if h.total == 0 {
		return 0
	}
	return h.sum / float64(h.total)
}

// Quantile returns the value at quantile q in [0, 1]: the value of rank
// ceil(q*n) (at least 1) in sorted order, as its bucket's midpoint clamped
// to the recorded minimum and maximum, so within 0.4% of the exact value.
// Quantile(1) is the exact maximum. It returns 0 when nothing is recorded.
func (h *histogram) Quantile(q float64) int64 {
	if h.total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.total)))
	rank = min(max(rank, 1), h.total)
	if rank == h.total {
		return h.max
	}
	var seen uint64
	for i, n := range h.counts {
		seen += n
		if seen >= rank {
			lo, width := bucketRange(i)
			return min(max(lo+(width-1)/2, h.min), h.max)
		}
	}
	return h.max // unreachable: the counts add up to total
}
