package memstore

// UpdateAt replaces the TAT of key in group with f(tat) under the group's
// lock, for a caller that read epoch before it established that it owns
// group (see Store), and reports whether it did. An absent key is passed to
// f as 0 (rested) and stored only if f gives a TAT after now (the key is
// then no longer rested); it is left absent, and false returned, when the
// epoch has moved since: the key may have been handed off. f must be quick:
// it runs under the lock.
func (s *Store) UpdateAt(epoch uint64, group, key string, now int64, f func(tat int64) int64) bool {
	sh := s.shardFor(group)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	tat, ok := sh.tats[key]
	if !ok && s.epoch.Load() != epoch {
		return false
	}
	next := f(tat)
	if ok || next > now {
		s.setLocked(sh, key, next)
	}
	return true
}
