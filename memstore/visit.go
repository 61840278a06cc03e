package memstore

// SweepFunc is Sweep that also calls swept with every key it removes, under
// that key's shard lock: swept must be quick and must not call back into
// the store.
func (s *Store) SweepFunc(now int64, swept func(key string)) int {
	removed := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k, tat := range sh.tats {
			if tat <= now {
				delete(sh.tats, k)
				removed++
				if swept != nil {
					swept(k)
				}
			}
		}
		sh.mu.Unlock()
	}
	s.forget(removed)
	return removed
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
