package owner

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/permit"
)

// permitEntry is one concurrency key's live permits in owner memory, with
// the limit and policy name it was last used with. mu guards every field;
// a request holds the mu of each of its concurrency keys (taken in sorted
// key order, see lockSets) across its rate decision and its write-through,
// so its permits commit all or nothing. Lock order: entry mu, then a
// permitShard's mu or memstore's shard lock; never the reverse while
// blocking (eviction only TryLocks).
type permitEntry struct {
	mu    sync.Mutex
	set   permit.Set
	limit permit.Limit
	name  string
	// last is an upper bound of the latest expiry of set's permits (a
	// release does not lower it): ResetAfter and the Redis PX.
	last int64
	// counted is how many of set.Expired() weir_permits_expired_total
	// has counted (a Set drops expired permits at any call).
	counted int64
	// dropped is set when the entry left the table (hand-off, sweep,
	// eviction): a request that locked it must start over.
	dropped bool
}

// permitShards is how many locked partitions the permit table has.
const permitShards = 64

type permitShard struct {
	mu   sync.Mutex
	sets map[string]*permitEntry
	// lastScan is when evictLocked last scanned the shard (0: never).
	lastScan int64
	_        [32]byte // keep neighbouring shards' locks off one cache line
}

// permitTable holds the permit sets of concurrency keys beside memstore's
// TATs, sharded by group. max caps the sets held (Config.MaxPermitKeys,
// as --max-keys caps TATs): a new key beyond it evicts the shard's empty
// sets first, and is refused (memory_full) if none are.
type permitTable struct {
	seed   maphash.Seed
	mask   uint64
	shards []permitShard
	max    int64
	n      atomic.Int64
}

func newPermitTable(maxKeys int) *permitTable {
	t := &permitTable{seed: maphash.MakeSeed(), mask: permitShards - 1, shards: make([]permitShard, permitShards), max: int64(maxKeys)}
	for i := range t.shards {
		t.shards[i].sets = make(map[string]*permitEntry)
	}
	return t
}

func (t *permitTable) shardFor(group string) *permitShard {
	return &t.shards[maphash.String(t.seed, group)&t.mask]
}

// get returns key's entry, nil when absent.
func (t *permitTable) get(group, key string) *permitEntry {
	sh := t.shardFor(group)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.sets[key]
}

// insertAt returns key's entry, holding set (nil: empty) if the key was
// absent. Like memstore.PutAt, it creates nothing and returns
// memstore.ErrStaleEpoch when the memory's epoch is no longer epoch (a
// drop ran since the caller checked ownership), and memstore.ErrFull when
// the cap leaves no room.
func (t *permitTable) insertAt(mem *memstore.Store, epoch uint64, group, key string, set *permit.Set, now int64) (*permitEntry, error) {
	sh := t.shardFor(group)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e := sh.sets[key]; e != nil {
		return e, nil // a concurrent first use won: it is at least as new as this load
	}
	if mem.Epoch() != epoch {
		return nil, memstore.ErrStaleEpoch
	}
	if t.max > 0 && t.n.Load() >= t.max && !t.evictLocked(sh, now) {
		return nil, memstore.ErrFull
	}
	e := &permitEntry{}
	if set != nil {
		e.set = *set
		for _, p := range e.set.Permits(now) {
			e.last = max(e.last, p.Expiry)
		}
	}
	sh.sets[key] = e
	t.n.Add(1)
	return e, nil
}

// evictLocked drops the shard's sets that hold no permit at now (they
// decide like absent keys, and Redis has their snapshot) and reports
// whether a new one fits. Busy entries are skipped. A shard is scanned at
// most once a millisecond, as memstore's is: at the cap, a flood of new
// keys would otherwise scan the whole shard, under its lock, per key.
// sh.mu is held.
func (t *permitTable) evictLocked(sh *permitShard, now int64) bool {
	if sh.lastScan != 0 && now >= sh.lastScan && now-sh.lastScan < int64(time.Millisecond) {
		return false
	}
	sh.lastScan = now
	for k, e := range sh.sets {
		if !e.mu.TryLock() {
			continue
		}
		if e.set.Expire(now); e.set.Len() == 0 {
			e.dropped = true
			delete(sh.sets, k)
			t.n.Add(-1)
		}
		e.mu.Unlock()
	}
	return t.n.Load() < t.max
}

// drop removes every key for which lost is true and returns how many. Run
// it after memstore.DeleteFunc has moved the epoch, so no request re-creates
// what it removes; a request that holds a removed entry's lock finishes
// (its write-through reaches Redis first), later ones find it dropped.
func (t *permitTable) drop(lost func(key string) bool) int {
	var gone []*permitEntry
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for k, e := range sh.sets {
			if lost(k) {
				delete(sh.sets, k)
				gone = append(gone, e)
			}
		}
		sh.mu.Unlock()
	}
	for _, e := range gone {
		e.mu.Lock()
		e.dropped = true
		e.mu.Unlock()
	}
	t.n.Add(-int64(len(gone)))
	return len(gone)
}

// sweepStats is what one sweep found, per limit name.
type sweepStats struct {
	live    map[string]int64 // slots in flight
	expired map[string]int64 // permits whose TTL passed since the last sweep
	dropped int              // empty sets forgotten
}

// sweep expires the permits of every set at now, forgets the empty sets
// and reports what it saw. It locks one entry at a time, no shard lock
// held while it waits (an entry may be held across a Redis write).
func (t *permitTable) sweep(now int64) sweepStats {
	st := sweepStats{live: map[string]int64{}, expired: map[string]int64{}}
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		keys := make([]string, 0, len(sh.sets))
		entries := make([]*permitEntry, 0, len(sh.sets))
		for k, e := range sh.sets {
			keys, entries = append(keys, k), append(entries, e)
		}
		sh.mu.Unlock()
		for j, e := range entries {
			e.mu.Lock()
			if !e.dropped {
				e.set.Expire(now)
				if n := e.set.Expired() - e.counted; n > 0 {
					st.expired[e.name] += n
				}
				e.counted = e.set.Expired()
				if e.set.Len() > 0 {
					st.live[e.name] += e.set.InFlight()
				} else if t.remove(sh, keys[j], e) {
					st.dropped++
				}
			}
			e.mu.Unlock()
		}
	}
	return st
}

// remove deletes key from sh if it still maps to e (held by the caller).
func (t *permitTable) remove(sh *permitShard, key string, e *permitEntry) bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.sets[key] != e {
		return false
	}
	e.dropped = true
	delete(sh.sets, key)
	t.n.Add(-1)
	return true
}

// len is the number of sets held.
func (t *permitTable) len() int { return int(t.n.Load()) }
