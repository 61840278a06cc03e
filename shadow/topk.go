package shadow

import (
	"container/heap"
	"slices"
	"strings"
)

// topK is a Space-Saving sketch (Metwally, Agrawal, El Abbadi, 2005): it
// tracks at most k keys and finds every key whose count exceeds total/k,
// each with an overestimate of at most Err. When a new key arrives and the
// sketch is full, it takes the place of the key with the smallest count and
// inherits that count as its error. Not safe for concurrent use.
//
// Written here rather than imported: no maintained Go implementation was
// available from the module proxy this project uses, and the algorithm is
// a map and a min-heap.
type topK struct {
	k     int
	items map[string]*item
	heap  minHeap
}

// Count is one key's estimate: its true count lies in [Count-Err, Count].
type Count struct {
	Key   string `json:"key"`
	Count int64  `json:"count"`
	Err   int64  `json:"error"`
}

type item struct {
	Count
	index int // in the heap
}

func newTopK(k int) *topK { return &topK{k: k, items: make(map[string]*item, k)} }

// add counts n more for key.
func (t *topK) add(key string, n int64) {
	if it, ok := t.items[key]; ok {
		it.Count.Count += n
		heap.Fix(&t.heap, it.index)
		return
	}
	if len(t.heap) < t.k {
		it := &item{Count: Count{Key: key, Count: n}}
		t.items[key] = it
		heap.Push(&t.heap, it)
		return
	}
	min := t.heap[0]
	delete(t.items, min.Key)
	min.Err = min.Count.Count
	min.Key, min.Count.Count = key, min.Count.Count+n
	t.items[key] = min
	heap.Fix(&t.heap, 0)
}

// top returns up to n estimates, largest count first (ties by key).
func (t *topK) top(n int) []Count {
	out := make([]Count, 0, len(t.heap))
	for _, it := range t.heap {
		out = append(out, it.Count)
	}
	sortCounts(out)
	return out[:min(n, len(out))]
}

func sortCounts(cs []Count) {
	slices.SortFunc(cs, func(a, b Count) int {
		if a.Count != b.Count {
			if a.Count > b.Count {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Key, b.Key)
	})
}

type minHeap []*item

func (h minHeap) Len() int           { return len(h) }
func (h minHeap) Less(i, j int) bool { return h[i].Count.Count < h[j].Count.Count }
func (h minHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *minHeap) Push(x any) {
	it := x.(*item)
	it.index = len(*h)
	*h = append(*h, it)
}
func (h *minHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
