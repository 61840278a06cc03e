package permit

import (
	"container/heap"
	"slices"
)

// entry is one held permit; index is its place in the heap.
type entry struct {
	id     ID
	cost   int64
	expiry int64
	index  int
}

// expiryHeap orders entries by expiry, then id, so that every order the
// package produces (Permits, the encoding) is deterministic.
type expiryHeap []*entry

func (h expiryHeap) Len() int { return len(h) }
func (h expiryHeap) Less(i, j int) bool {
	return before(h[i], h[j])
}
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *expiryHeap) Push(x any) {
	e := x.(*entry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

func before(a, b *entry) bool {
	if a.expiry != b.expiry {
		return a.expiry < b.expiry
	}
	return slices.Compare(a.id[:], b.id[:]) < 0
}

func (h *expiryHeap) push(e *entry)   { heap.Push(h, e) }
func (h *expiryHeap) popMin() *entry  { return heap.Pop(h).(*entry) }
func (h *expiryHeap) remove(e *entry) { heap.Remove(h, e.index) }
func (h *expiryHeap) fix(e *entry)    { heap.Fix(h, e.index) }

// sorted returns the entries earliest expiry first, leaving h as it is.
func (h expiryHeap) sorted() []*entry {
	out := slices.Clone(h)
	slices.SortFunc(out, func(a, b *entry) int {
		if before(a, b) {
			return -1
		}
		return 1
	})
	return out
}
