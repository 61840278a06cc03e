package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/permit"
)

// PermitSet is one concurrency key's live permits for [Backend.StoreSets]:
// Set is permit.Set.MarshalBinary() (bytes 2..9 its latest time, which
// orders two snapshots of one key), Expiry the latest expiry of its
// permits (Unix ns; at most Now for an empty set) and Now the time the
// snapshot is current at, on the TATs' time base.
type PermitSet struct {
	Key    string
	Set    []byte
	Expiry int64
	Now    int64
}

// Validate reports whether p is a snapshot [Backend.StoreSets] would write:
// a non-empty key, Now > 0, Expiry >= 0 and bytes that start as a
// permit.Set encoding (version and latest time). It changes nothing and
// sends nothing; the in-memory twin calls it too.
func (p PermitSet) Validate() error {
	if p.Key == "" || p.Now <= 0 || p.Expiry < 0 || len(p.Set) < 1+8 || p.Set[0] != permit.Version {
		return fmt.Errorf("redisbackend: invalid permit set for %q: need a key, now > 0, expiry >= 0 and a permit.Set encoding", p.Key)
	}
	return nil
}

// ErrBadPermitSet is wrapped by LoadSets's error for a key holding bytes
// that are neither a permit set nor a TAT.
var ErrBadPermitSet = errors.New("redisbackend: value is not a permit set")

// LoadSets reads the permit sets of keys in one pipeline of MGETs (one per
// hash slot on Cluster, as LoadTATs). The result has one entry per key: nil
// for a missing key, and for a key holding a TAT (its limit was a rate
// limit until lately: an empty set, as no permit is live there); a key
// holding other bytes fails the call with an error wrapping
// ErrBadPermitSet (and permit.ErrEncoding when it looked like a set), never
// an empty set. Bounded by ctx and Config.Timeout.
func (b *Backend) LoadSets(ctx context.Context, keys []string) ([]*permit.Set, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	sets := make([]*permit.Set, len(keys))
	err := b.loadEach(ctx, keys, "permit sets", func(k int, s string) (err error) {
		sets[k], err = DecodeSet(keys[k], []byte(s))
		return err
	})
	if err != nil {
		return nil, err
	}
	return sets, nil
}

// DecodeSet reads a stored value of key as LoadSets does: a permit set, nil
// for a TAT, an error wrapping ErrBadPermitSet for anything else. The
// in-memory twin calls it so that both read values alike.
func DecodeSet(key string, v []byte) (*permit.Set, error) {
	if len(v) > 0 && v[0] == permit.Version {
		s := new(permit.Set)
		if err := s.UnmarshalBinary(v); err != nil {
			return nil, fmt.Errorf("redisbackend: key %q: %w: %w", key, ErrBadPermitSet, err)
		}
		return s, nil
	}
	if _, err := parseTAT(string(v)); err == nil {
		return nil, nil
	}
	return nil, fmt.Errorf("redisbackend: key %q: %w (%d bytes)", key, ErrBadPermitSet, len(v))
}

// SetPX is the PX expiry in milliseconds StoreSets gives a snapshot:
// ceil((Expiry-Now)/1ms)+1 plus ExpiryGrace, or 0 (delete the key) when
// the set's last permit expired more than the grace before Now.
func SetPX(p PermitSet) int64 {
	if p.Expiry+ExpiryGrace.Nanoseconds() <= p.Now {
		return 0
	}
	return (p.Expiry-p.Now+999_999)/1_000_000 + 1 + ExpiryGrace.Milliseconds()
}

// StoreSets writes permit-set snapshots in one pipeline (split by slot on
// Cluster), each with PX SetPX(p); a snapshot whose permits all expired
// more than the grace ago deletes its key. A write never replaces a later
// snapshot (by bytes 2..9, the set's latest time; a tie overwrites: one
// owner writes a key's snapshots in order); a stored TAT or other bytes are
// replaced. Invalid input fails the call before anything is sent. On
// failure some writes may have been applied.
func (b *Backend) StoreSets(ctx context.Context, sets []PermitSet) error {
	for _, p := range sets {
		if err := p.Validate(); err != nil {
			return err
		}
	}
	return b.storeEach(ctx, len(sets), "permit sets", func(ctx context.Context, pipe redis.Pipeliner, i int, full bool) *redis.Cmd {
		p := sets[i]
		return queueScript(ctx, pipe, storeSetScript, full, []string{p.Key}, string(p.Set), strconv.FormatInt(SetPX(p), 10))
	})
}

// storeSetLua writes KEYS[1] = ARGV[1] (a permit set) with expiry ARGV[2]
// ms, or deletes the key when ARGV[2] is 0, unless the key holds a set
// with a later latest time (bytes 2..9, read as two exact 32-bit halves).
const storeSetLua = `
local raw = redis.call('GET', KEYS[1])
if raw and string.len(raw) >= 9 and string.byte(raw, 1) == 1 then
  local cur_hi, cur_lo = struct.unpack('>I4I4', raw, 2)
  local new_hi, new_lo = struct.unpack('>I4I4', ARGV[1], 2)
  if cur_hi > new_hi or (cur_hi == new_hi and cur_lo > new_lo) then
    return 0
  end
end
if ARGV[2] == '0' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
return 1
`

var storeSetScript = redis.NewScript(storeSetLua)
