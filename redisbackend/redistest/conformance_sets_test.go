package redistest_test

import (
	"github.com/weirhq/weir/permit"
	"github.com/weirhq/weir/redisbackend"
	"github.com/weirhq/weir/redisbackend/redistest"
)

func loadSets(keys ...string) step { return step{op: redistest.OpLoadSets, keys: keys} }

func storeSets(sets ...redisbackend.PermitSet) step {
	return step{op: redistest.OpStoreSets, sets: sets}
}

func raw(kv ...string) step {
	st := step{op: opRaw, raw: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		st.raw[kv[i]] = kv[i+1]
	}
	return st
}

// snap is key's snapshot at now holding one permit per ttl (id byte tag+i,
// cost 1), as an owner writes it.
func snap(key string, now int64, tag byte, ttls ...int64) redisbackend.PermitSet {
	var set permit.Set
	set.Expire(now)
	last := int64(0)
	for i, ttl := range ttls {
		id := permit.ID{tag, byte(i + 1)}
		if _, err := set.Acquire(now, permit.Limit{MaxInFlight: 10, TTL: ttl}, id, 1); err != nil {
			panic(err)
		}
		last = max(last, now+ttl)
	}
	b, _ := set.MarshalBinary()
	return redisbackend.PermitSet{Key: key, Set: b, Expiry: last, Now: now}
}

// setCases are the conformance cases of permit sets (LoadSets, StoreSets).
var setCases = []struct {
	name  string
	steps func(t0 int64) []step
}{
	{"permit set stored then loaded", func(t0 int64) []step {
		return []step{storeSets(snap(ka, t0, 1, 3*s, 2*s), snap(kc, t0, 2, s)), loadSets(ka, kb, kc)}
	}},
	{"a later snapshot is kept, a tie overwrites", func(t0 int64) []step {
		return []step{
			storeSets(snap(ka, t0+2*s, 1, 3*s)),
			storeSets(snap(ka, t0+s, 2, 5*s)), loadSets(ka),
			storeSets(snap(ka, t0+2*s, 3, 4*s)), loadSets(ka),
			storeSets(snap(ka, t0+3*s, 4)), loadSets(ka), // later and empty: its expiry is long past
		}
	}},
	{"an empty snapshot past the grace deletes the key", func(t0 int64) []step {
		empty := snap(ka, t0+5*s, 1)
		empty.Expiry = t0 + s
		return []step{storeSets(snap(ka, t0, 1, s)), storeSets(empty), loadSets(ka)}
	}},
	{"a TAT reads as an empty set and a set replaces it", func(t0 int64) []step {
		return []step{
			store(redisbackend.TAT{Key: ka, TAT: t0 + 3*s, Now: t0}), loadSets(ka),
			storeSets(snap(ka, t0, 1, 2*s)), loadSets(ka), load(ka),
		}
	}},
	{"bytes neither a set nor a TAT are a load error", func(t0 int64) []step {
		return []step{
			raw(ka, "\x01garbage!!", kb, "hello"),
			loadSets(ka), loadSets(kb), loadSets(kc, kb),
			storeSets(snap(ka, t0, 1, s)), loadSets(ka),
		}
	}},
	{"an invalid snapshot applies nothing", func(t0 int64) []step {
		bad := snap(kb, t0, 1, s)
		bad.Set = bad.Set[:5]
		return []step{
			storeSets(snap(ka, t0, 1, s), bad),
			storeSets(redisbackend.PermitSet{Key: "", Set: snap(ka, t0, 1).Set, Now: t0}),
			storeSets(snap(ka, 0, 1)), loadSets(ka, kb),
		}
	}},
	{"a canceled set call applies nothing", func(t0 int64) []step {
		st, ld := storeSets(snap(ka, t0, 1, s)), loadSets(ka)
		st.canceled, ld.canceled = true, true
		return []step{st, ld, loadSets(ka)}
	}},
}
