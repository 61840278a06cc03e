package memstore

// UpdateAt replaces key's TAT with f(tat) (tat 0 and held false for an
// absent key) under the key's shard lock, and returns f's error. f must be
// quick and must not call back into the store; when it returns an error
// nothing is stored. Like PutAt, it changes nothing and returns
// ErrStaleEpoch when key is absent and the epoch moved since the caller
// read epoch, and ErrFull when an absent key does not fit under MaxKeys.
// Unlike Put, the new TAT may be earlier than the old one: f owns the
// key's accounting (a share's rescaling may move it either way).
func (s *Store) UpdateAt(epoch uint64, group, key string, now int64, f func(tat int64, held bool) (int64, error)) error {
	sh := s.shardFor(group)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	tat, held := sh.tats[key]
	if !held && s.epoch.Load() != epoch {
		return ErrStaleEpoch
	}
	if !held && !s.makeRoomLocked(sh, 1, now) {
		s.refused.Add(1)
		return ErrFull
	}
	next, err := f(tat, held)
	if err != nil {
		return err
	}
	s.setLocked(sh, key, next)
	return nil
}
