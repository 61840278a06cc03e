package redistest

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/weirhq/weir/permit"
	"github.com/weirhq/weir/redisbackend"
)

// LoadSets is [redisbackend.Backend.LoadSets]: one set per key, nil for a
// missing or expired key and for a key holding a TAT; other bytes fail the
// call as on a Backend (redisbackend.DecodeSet reads both).
func (m *Memory) LoadSets(ctx context.Context, keys []string) ([]*permit.Set, error) {
	m.count(OpLoadSets)
	if len(keys) == 0 {
		return nil, nil
	}
	type loaded struct {
		sets []*permit.Set
		err  error
	}
	got, err := do(ctx, m, OpLoadSets, func(now int64) loaded {
		out := make([]*permit.Set, len(keys))
		for i, k := range keys {
			tat, ok := m.liveLocked(k, now)
			if !ok {
				continue
			}
			v := m.mu.keys[k].set
			if v == nil {
				v = []byte(redisbackend.FormatTAT(tat))
			}
			s, err := redisbackend.DecodeSet(k, v)
			if err != nil {
				return loaded{err: err}
			}
			out[i] = s
		}
		return loaded{sets: out}
	})
	if err != nil {
		return nil, fmt.Errorf("redisbackend: load %d permit sets: %w", len(keys), err)
	}
	return got.sets, got.err
}

// StoreSets is [redisbackend.Backend.StoreSets]: each snapshot with PX
// redisbackend.SetPX counted from the twin's clock, never over a stored set
// with a later latest time (bytes 2..9); invalid input applies nothing.
func (m *Memory) StoreSets(ctx context.Context, sets []redisbackend.PermitSet) error {
	m.count(OpStoreSets)
	for _, p := range sets {
		if err := p.Validate(); err != nil {
			return err
		}
	}
	if len(sets) == 0 {
		return nil
	}
	_, err := do(ctx, m, OpStoreSets, func(now int64) struct{} {
		for _, p := range sets {
			m.storeSetLocked(p, now)
		}
		return struct{}{}
	})
	if err != nil {
		return fmt.Errorf("redisbackend: store %d permit sets: %w", len(sets), err)
	}
	return nil
}

func (m *Memory) storeSetLocked(p redisbackend.PermitSet, clock int64) {
	if _, ok := m.liveLocked(p.Key, clock); ok {
		if cur := m.mu.keys[p.Key].set; len(cur) >= 9 && cur[0] == permit.Version && string(cur[1:9]) > string(p.Set[1:9]) {
			return // a later snapshot is stored
		}
	}
	px := redisbackend.SetPX(p)
	if px == 0 {
		delete(m.mu.keys, p.Key)
		return
	}
	m.mu.keys[p.Key] = entry{set: slices.Clone(p.Set), expireMs: clock/1_000_000 + px}
}

// Set returns the permit-set bytes stored for key at the twin's clock, and
// false when the key is missing, expired or holds a TAT. It is not counted
// and no fault applies.
func (m *Memory) Set(key string) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.liveLocked(key, m.clk.Now().UnixNano()); !ok || m.mu.keys[key].set == nil {
		return nil, false
	}
	return slices.Clone(m.mu.keys[key].set), true
}

// PutRaw stores v under key for ttl (SET key v PX ttl), as a client other
// than weir might: a test's corrupt value. It is not counted and no fault
// applies.
func (m *Memory) PutRaw(key string, v []byte, ttl time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mu.keys[key] = entry{set: slices.Clone(v), expireMs: m.clk.Now().UnixNano()/1_000_000 + ttl.Milliseconds()}
}
