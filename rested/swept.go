package rested

import (
	"hash/maphash"
	"sync"
)

// sweptSet remembers the keys this owner's sweeper freed as rested during
// one memory epoch (memstore.Store.Epoch), by a 64-bit hash of the key.
//
// Why it may skip a load: while the epoch does not move, this node has
// owned every group it holds without a break (a hand-off, rejoin or thaw
// drops keys and so moves the epoch), and only an owner writes a fast key's
// TAT to Redis. So Redis holds no TAT of a swept key later than the rested
// one this node swept, and the key decides as rested without asking Redis.
// A hash collision (about n²/2⁶⁴ for n keys) could skip one key's load
// within an epoch.
//
// Safe for concurrent use; mu guards everything. When it holds maxKeys
// hashes it starts over, which costs loads, never correctness.
type sweptSet struct {
	seed    maphash.Seed
	maxKeys int
	mu      sync.Mutex
	epoch   uint64
	keys    map[uint64]struct{}
}

func newSweptSet(maxKeys int) *sweptSet {
	return &sweptSet{seed: maphash.MakeSeed(), maxKeys: maxKeys, keys: make(map[uint64]struct{})}
}

// add records key as swept at epoch. A later epoch empties the set first;
// an earlier one (a sweep that raced a drop) records nothing.
func (s *sweptSet) add(epoch uint64, key string) {
	h := maphash.String(s.seed, key)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case epoch < s.epoch:
		return
	case epoch > s.epoch || len(s.keys) >= s.maxKeys:
		clear(s.keys)
		s.epoch = epoch
	}
	s.keys[h] = struct{}{}
}

// has reports whether key was swept at epoch.
func (s *sweptSet) has(epoch uint64, key string) bool {
	h := maphash.String(s.seed, key)
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.keys[h]
	return ok && s.epoch == epoch
}

// len returns the hashes held.
func (s *sweptSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.keys)
}
