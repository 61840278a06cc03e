package memstore

// SweepFunc is Sweep that also calls swept with every key it removes, under
// that key's shard lock: swept must be quick and must not call back into
// the store.
func (s *Store) SweepFunc(now int64, swept func(key string)) int {
	now = decisionNow(now)
	removed := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.peak = max(sh.peak, len(sh.tats))
		for k, tat := range sh.tats {
			if tat <= now {
				delete(sh.tats, k)
				removed++
				if swept != nil {
					swept(k)
				}
			}
		}
		sh.shrinkLocked()
		sh.mu.Unlock()
	}
	s.forget(removed)
	return removed
}

// shrinkMinPeak is the least peak at which a shard's map is rebuilt.
const shrinkMinPeak = 256

// shrinkLocked rebuilds the shard's map when it holds a quarter or less of
// its peak: a Go map never gives back the room its deleted keys used, so
// without this a flood of keys would keep its memory after the sweeper
// freed them. sh.mu is held.
func (sh *shard) shrinkLocked() {
	if sh.peak < shrinkMinPeak || len(sh.tats) > sh.peak/4 {
		return
	}
	m := make(map[string]int64, len(sh.tats))
	for k, tat := range sh.tats {
		m[k] = tat
	}
	sh.tats, sh.peak = m, len(m)
}

// Range calls f with every held key and its TAT, locking one shard at a
// time: f must be quick and must not call back into the store. Keys decided
// while Range runs may or may not be visited.
func (s *Store) Range(f func(key string, tat int64)) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k, tat := range sh.tats {
			f(k, tat)
		}
		sh.mu.Unlock()
	}
}
