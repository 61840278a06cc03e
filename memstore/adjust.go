package memstore

import (
	"context"

	"github.com/weirhq/weir/gcra"
)

// Adjust returns the TAT a decision must use for key in place of tat, the
// TAT stored (0 for an absent key). It runs under the key's shard lock:
// it must be quick and must not call back into the store. The lease
// ledger uses it to keep units out on leases from being refilled.
type Adjust func(key string, tat int64) int64

// DecideAdjusted is DecideAt deciding each key on adjust(key, tat) instead
// of its stored tat (nil adjust: DecideAt). What an admitted decision
// stores is the decision's TAT, computed from the adjusted one.
func (s *Store) DecideAdjusted(ctx context.Context, epoch uint64, group string, keys []string, limits []gcra.Limit, cost, now int64, out []gcra.Result, adjust Adjust) (gcra.Result, error) {
	return s.decide(ctx, group, keys, limits, cost, now, out, func() bool { return s.epoch.Load() == epoch }, adjust)
}

// UpdateAt replaces key's TAT with f(tat) (tat 0 and held false for an
// absent key) under the key's shard lock, and returns f's error. f must be
// quick and must not call back into the store; when it returns an error
// nothing is stored. Like PutAt, it changes nothing and returns
// ErrStaleEpoch when key is absent and the epoch moved since the caller
// read epoch, and ErrFull when an absent key does not fit under MaxKeys.
// Unlike Put, the new TAT may be earlier than the old one: f owns the
// key's accounting (a lease return credits units back).
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
