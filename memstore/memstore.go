package memstore

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/gcra"
)

// ErrFull is returned by Decide when a request needs a new key while the
// store holds MaxKeys keys that are all still live (not rested). Nothing
// was decided; the caller applies its failure policy.
var ErrFull = errors.New("memstore: full of live keys")

// Config sizes a Store.
type Config struct {
	// Shards is the number of independently locked partitions, a power of
	// two. More shards mean less contention and a little more fixed memory.
	Shards int
	// MaxKeys caps the keys held; 0 means no cap. When a new key would
	// exceed it, the rested keys of its shard are evicted first (they
	// decide like missing keys, so nothing is lost); if none are, Decide
	// returns ErrFull and Put drops the key. A flood of distinct keys then
	// costs bounded memory and falls back by policy.
	MaxKeys int
}

// DefaultConfig returns 256 shards, enough that two cores rarely contend,
// and no key cap.
func DefaultConfig() Config { return Config{Shards: 256} }

// Validate reports whether c is usable. It changes nothing.
func (c Config) Validate() error {
	if c.Shards <= 0 || c.Shards&(c.Shards-1) != 0 {
		return fmt.Errorf("memstore: shards %d must be a positive power of two", c.Shards)
	}
	if c.MaxKeys < 0 {
		return fmt.Errorf("memstore: max keys %d is negative", c.MaxKeys)
	}
	return nil
}

// maxStackLimits is how many limits a composite decision handles without
// allocating.
const maxStackLimits = 8

// ErrStaleEpoch is returned by DecideAt when a key the decision needs is
// absent and DeleteFunc ran since the decision read its epoch: the key may
// have been handed off, and deciding it from nothing would grant a full
// burst against a TAT that was spent.
var ErrStaleEpoch = errors.New("memstore: keys were dropped since the decision began")

// Store holds TATs in memory. Safe for concurrent use.
//
// The store has an epoch, which DeleteFunc advances before it removes
// anything. A caller that may race a hand-off reads Epoch before checking
// that it owns a group, then passes that epoch to PutAt and DecideAt: both
// re-check it under the shard lock, so a key that the hand-off dropped is
// never re-created from nothing by a decision that began before the drop.
// A held key is safe to decide whatever the epoch: only DeleteFunc removes
// state that matters (Sweep removes rested keys, which decide the same as
// absent ones), and a stale PutAt cannot re-insert one.
type Store struct {
	seed    maphash.Seed
	mask    uint64
	epoch   atomic.Uint64
	shards  []shard
	maxKeys int64
	keys    atomic.Int64 // held, across shards; kept only with a cap
	evicted atomic.Int64
	refused atomic.Int64
}

type shard struct {
	mu       sync.Mutex
	tats     map[string]int64
	lastScan int64    // now of the last eviction scan, to scan at most once per ms
	peak     int      // most keys seen in tats by a sweep since tats was made (visit.go)
	_        [24]byte // keep neighbouring shards' locks off one cache line
}

// New returns an empty store. It panics if cfg is invalid; call
// cfg.Validate first when cfg comes from a user.
func New(cfg Config) *Store {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	s := &Store{seed: maphash.MakeSeed(), mask: uint64(cfg.Shards - 1), shards: make([]shard, cfg.Shards), maxKeys: int64(cfg.MaxKeys)}
	for i := range s.shards {
		s.shards[i].tats = make(map[string]int64)
	}
	return s
}

func (s *Store) shardFor(group string) *shard {
	return &s.shards[maphash.String(s.seed, group)&s.mask]
}

// Decide decides one request of cost against limits[i] for keys[i] at now,
// atomically: every limit is evaluated and either all TATs move or none do
// (see gcra.DecideComposite, whose results it writes into out). All keys
// must belong to group; the store does not check, but keys of different
// groups in one call lose nothing but isolation from other groups' locks.
// Memory never blocks: ctx is checked once, so a caller whose deadline has
// passed consumes nothing. An absent key decides as a rested one.
func (s *Store) Decide(ctx context.Context, group string, keys []string, limits []gcra.Limit, cost, now int64, out []gcra.Result) (gcra.Result, error) {
	return s.decide(ctx, group, keys, limits, cost, now, out, func() bool { return true }, nil)
}

// DecideAt is Decide for a caller that read epoch (see Epoch) before it
// established that it owns group. If any key is absent and the epoch has
// moved since, it decides nothing and returns ErrStaleEpoch.
func (s *Store) DecideAt(ctx context.Context, epoch uint64, group string, keys []string, limits []gcra.Limit, cost, now int64, out []gcra.Result) (gcra.Result, error) {
	return s.DecideAdjusted(ctx, epoch, group, keys, limits, cost, now, out, nil)
}

// decide runs under the shard lock; current reports, under that lock,
// whether absent keys may be decided as rested; adjust, if not nil,
// replaces each TAT read (see Adjust).
func (s *Store) decide(ctx context.Context, group string, keys []string, limits []gcra.Limit, cost, now int64, out []gcra.Result, current func() bool, adjust Adjust) (gcra.Result, error) {
	if len(keys) != len(limits) {
		return gcra.Result{}, fmt.Errorf("memstore: %d keys for %d limits", len(keys), len(limits))
	}
	if err := ctx.Err(); err != nil {
		return gcra.Result{}, err
	}
	var buf [maxStackLimits]int64
	tats := buf[:0]
	if len(keys) > maxStackLimits {
		tats = make([]int64, 0, len(keys))
	}
	sh := s.shardFor(group)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	fresh := 0
	for _, k := range keys {
		tat, ok := sh.tats[k]
		if !ok {
			fresh++
		}
		if adjust != nil {
			tat = adjust(k, tat)
		}
		tats = append(tats, tat)
	}
	if fresh > 0 && !current() {
		return gcra.Result{}, ErrStaleEpoch
	}
	if fresh > 0 && !s.makeRoomLocked(sh, fresh, now) {
		s.refused.Add(1)
		return gcra.Result{}, ErrFull
	}
	agg, err := gcra.DecideComposite(tats, now, limits, cost, out)
	if err != nil || !agg.Allowed {
		return agg, err
	}
	for i, k := range keys {
		s.setLocked(sh, k, out[i].TAT)
	}
	return agg, nil
}

// Epoch returns the store's current epoch; see Store.
func (s *Store) Epoch() uint64 { return s.epoch.Load() }

// setLocked stores tat for k, counting a new key. sh.mu is held.
func (s *Store) setLocked(sh *shard, k string, tat int64) {
	if s.maxKeys > 0 {
		if _, ok := sh.tats[k]; !ok {
			s.keys.Add(1)
		}
	}
	sh.tats[k] = tat
}

// makeRoomLocked reports whether n new keys fit under the cap, evicting the
// shard's rested keys (TAT at or before now) when they do not. sh.mu is
// held. The room is not reserved: concurrent inserts into other shards may
// overshoot the cap by a few keys, never by more than one request's keys
// per shard.
func (s *Store) makeRoomLocked(sh *shard, n int, now int64) bool {
	if s.maxKeys == 0 || s.keys.Load()+int64(n) <= s.maxKeys {
		return true
	}
	if sh.lastScan != 0 && now >= sh.lastScan && now-sh.lastScan < int64(time.Millisecond) {
		return false // scanned within the last millisecond: a flood of new keys scans once per ms
	}
	sh.lastScan = now
	removed := 0
	rested := decisionNow(now)
	for k, tat := range sh.tats {
		if tat <= rested {
			delete(sh.tats, k)
			removed++
		}
	}
	s.keys.Add(-int64(removed))
	s.evicted.Add(int64(removed))
	return s.keys.Load()+int64(n) <= s.maxKeys
}

// decisionNow is now as a decision reads it (gcra clamps it to
// [0, gcra.MaxTime]): a TAT is rested exactly when it is at or before that,
// so Sweep and eviction forget only keys a decision would find rested.
func decisionNow(now int64) int64 { return min(max(now, 0), gcra.MaxTime) }

// Get returns the TAT stored for key in group, or 0.
func (s *Store) Get(group, key string) int64 {
	sh := s.shardFor(group)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.tats[key]
}

// Has reports whether key in group is held (possibly rested).
func (s *Store) Has(group, key string) bool {
	sh := s.shardFor(group)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	_, ok := sh.tats[key]
	return ok
}

// Put stores tat for key in group, keeping the later of tat and what is
// already there, so loading persisted state never makes a key more lenient.
// A key that was missing is held afterwards even when tat is 0, even over
// MaxKeys: check Room first.
func (s *Store) Put(group, key string, tat int64) {
	sh := s.shardFor(group)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s.putLocked(sh, key, tat)
}

// PutAt is Put for a caller that read epoch before it established that it
// owns group (see Store). It stores nothing and reports false when the
// epoch has moved since: the load it carries may predate a hand-off, and
// storing it would hold a key this node no longer owns.
func (s *Store) PutAt(epoch uint64, group, key string, tat int64) bool {
	sh := s.shardFor(group)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if s.epoch.Load() != epoch {
		return false
	}
	s.putLocked(sh, key, tat)
	return true
}

func (s *Store) putLocked(sh *shard, key string, tat int64) {
	if old, ok := sh.tats[key]; !ok || tat > old {
		s.setLocked(sh, key, tat)
	}
}

// Room reports whether n new keys of group fit under MaxKeys at now,
// evicting rested keys of the group's shard if needed; a false answer is
// counted in Refused. Call it before loading keys to Put, since Put never
// refuses: loaded state must not be dropped.
func (s *Store) Room(group string, n int, now int64) bool {
	if s.maxKeys == 0 {
		return true
	}
	sh := s.shardFor(group)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if !s.makeRoomLocked(sh, n, now) {
		s.refused.Add(1)
		return false
	}
	return true
}

// DeleteFunc deletes every key for which drop returns true (an owner
// handing groups off) and returns how many it removed. It advances the
// epoch first, so decisions that began earlier cannot re-create what it
// removes (see Store). It locks one shard at a time; drop must not call
// back into the store.
func (s *Store) DeleteFunc(drop func(key string) bool) int {
	s.epoch.Add(1)
	removed := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k := range sh.tats {
			if drop(k) {
				delete(sh.tats, k)
				removed++
			}
		}
		sh.mu.Unlock()
	}
	s.forget(removed)
	return removed
}

// forget uncounts removed keys.
func (s *Store) forget(removed int) {
	if s.maxKeys > 0 {
		s.keys.Add(-int64(removed))
	}
}

// Sweep deletes every key whose TAT is at or before now, clamped to
// gcra.MaxTime as decisions clamp it (a rested key and a missing key decide
// identically) and returns how many it removed. It locks
// one shard at a time.
func (s *Store) Sweep(now int64) int { return s.SweepFunc(now, nil) }

// Evicted returns how many rested keys were evicted to make room under
// MaxKeys (Sweep's removals are not counted).
func (s *Store) Evicted() int64 { return s.evicted.Load() }

// Refused returns how many Decide and Put calls found the store full of
// live keys (ErrFull).
func (s *Store) Refused() int64 { return s.refused.Load() }

// Len returns the number of keys held, rested or not.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.tats)
		sh.mu.Unlock()
	}
	return n
}
