package redisbackend

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// TAT is one key's state for [Backend.StoreTATs]: its theoretical arrival
// time and the now (Unix nanoseconds, Redis time base) it is current at.
type TAT struct {
	Key string
	TAT int64
	Now int64
}

// Validate reports whether t is a TAT [Backend.StoreTATs] would write: a
// non-empty key, Now > 0 and 0 <= TAT <= MaxTime. It changes nothing and
// sends nothing; in-memory twins of the Backend call it so that they refuse
// exactly what the Backend refuses.
func (t TAT) Validate() error {
	if t.Key == "" || t.Now <= 0 || t.TAT < 0 || t.TAT > MaxTime {
		return fmt.Errorf("redisbackend: invalid tat %+v: need a key, now > 0 and 0 <= tat <= %d", t, MaxTime)
	}
	return nil
}

// LoadTATs reads the TATs of keys in one pipeline of MGETs: one in all on
// a single Redis, one per hash slot on Cluster (an MGET may not cross
// slots; keys of one group share their group's slot). The result has one
// entry per key, 0 for a missing key, which gcra treats as rested (MGET
// also answers nothing for a key holding another type than a string, so
// such a key reads as missing too). The keys need not share a hash tag. The
// first failure fails the whole call; bounded by ctx and Config.Timeout.
func (b *Backend) LoadTATs(ctx context.Context, keys []string) ([]int64, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	tats := make([]int64, len(keys))
	err := b.loadEach(ctx, keys, "tats", func(k int, s string) (err error) {
		if tats[k], err = parseTAT(s); err != nil {
			return fmt.Errorf("redisbackend: key %q: %w", keys[k], err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return tats, nil
}

// loadEach reads keys in one pipeline of MGETs (one per hash slot on
// Cluster), bounded by ctx and Config.Timeout, and hands each present
// key's value to found with the key's index; missing keys are skipped.
// The first failure (of Redis or of found) fails the call. what names the
// values in errors.
func (b *Backend) loadEach(ctx context.Context, keys []string, what string, found func(k int, v string) error) error {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	batches := b.slotBatches(keys)
	pipe := b.client.Pipeline()
	cmds := make([]*redis.SliceCmd, len(batches))
	for i, batch := range batches {
		args := make([]string, len(batch))
		for j, k := range batch {
			args[j] = keys[k]
		}
		cmds[i] = pipe.MGet(ctx, args...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		b.noteError(err)
		return fmt.Errorf("redisbackend: load %d %s: %w", len(keys), what, err)
	}
	for i, c := range cmds {
		vals, err := c.Result()
		if err == nil && len(vals) != len(batches[i]) {
			err = fmt.Errorf("mget of %d keys returned %d values", len(batches[i]), len(vals))
		}
		if err != nil {
			return fmt.Errorf("redisbackend: load %d %s: %w", len(keys), what, err)
		}
		for j, v := range vals {
			k := batches[i][j]
			if v == nil { // missing key
				continue
			}
			s, ok := v.(string)
			if !ok {
				return fmt.Errorf("redisbackend: key %q: unexpected %T from mget", keys[k], v)
			}
			if err := found(k, s); err != nil {
				return err
			}
		}
	}
	return nil
}

// slotBatches splits the indexes of keys into the batches one MGET may
// read: all together on a single Redis (*redis.Client), by hash slot on any
// other client (Cluster). Batches keep the keys' order and come in the order
// of their first key.
func (b *Backend) slotBatches(keys []string) [][]int {
	if _, single := b.client.(*redis.Client); single {
		all := make([]int, len(keys))
		for i := range all {
			all[i] = i
		}
		return [][]int{all}
	}
	var batches [][]int
	at := make(map[uint16]int) // slot -> index in batches
	for i, k := range keys {
		slot := KeySlot(k)
		n, ok := at[slot]
		if !ok {
			n = len(batches)
			at[slot] = n
			batches = append(batches, nil)
		}
		batches[n] = append(batches[n], i)
	}
	return batches
}

// ExpiryGrace is added to the expiry of every TAT written on a caller's
// time base (StoreTATs, and Decide with an explicit now). That base differs
// from Redis's own clock by the caller's offset error and the write's
// transit time; a key that expired before its TAT passed would grant a
// burst early, while one that lives on past its TAT decides exactly like a
// missing key. So keys are kept a little too long, never too short.
const ExpiryGrace = time.Second

// StoreTATs writes TATs in one pipeline (split by slot on Cluster), each
// with PX expiry ceil((TAT-Now)/1ms)+1 milliseconds plus ExpiryGrace. A TAT
// more than ExpiryGrace before its Now is rested on any clock, which reads
// the same as a missing key, so its key is deleted instead. A write never moves a stored TAT
// backwards (nor deletes a later one): when two nodes both believed they
// owned a key — a partition, a frozen owner's buffered writes arriving after
// its successor's — Redis keeps the later TAT, the one that has admitted
// more. Each Now must be positive and each TAT in
// [0, MaxTime]; invalid input fails the call before anything is sent. Bounded
// by ctx and Config.Timeout; on failure some writes may have been applied.
func (b *Backend) StoreTATs(ctx context.Context, tats []TAT) error {
	for _, t := range tats {
		if err := t.Validate(); err != nil {
			return err
		}
	}
	return b.storeEach(ctx, len(tats), "tats", func(ctx context.Context, pipe redis.Pipeliner, i int, full bool) *redis.Cmd {
		t := tats[i]
		// A TAT more than the grace in the past is deleted (px 0).
		px := int64(0)
		if t.TAT+ExpiryGrace.Nanoseconds() > t.Now {
			px = (t.TAT-t.Now+999_999)/1_000_000 + 1 + ExpiryGrace.Milliseconds()
		}
		return queueScript(ctx, pipe, b.store, full, []string{t.Key}, formatTAT(t.TAT), strconv.FormatInt(px, 10))
	})
}

// storeEach runs n store script calls in one pipeline, queued by queue
// (EVALSHA, or EVAL when full), bounded by ctx and Config.Timeout, and
// runs again with EVAL the calls the server refused as NOSCRIPT (it lost
// its script cache: they did not run). what names the items in errors.
func (b *Backend) storeEach(ctx context.Context, n int, what string, queue func(ctx context.Context, pipe redis.Pipeliner, i int, full bool) *redis.Cmd) error {
	if n == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	run := func(idx []int, full bool) ([]*redis.Cmd, error) {
		pipe := b.client.Pipeline()
		cmds := make([]*redis.Cmd, len(idx))
		for j, i := range idx {
			cmds[j] = queue(ctx, pipe, i, full)
		}
		_, err := pipe.Exec(ctx)
		return cmds, err
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	cmds, err := run(all, false)
	b.noteError(err)
	var retry []int
	for i, c := range cmds {
		switch {
		case isNoScript(c.Err()):
			retry = append(retry, i)
		case c.Err() != nil:
			return fmt.Errorf("redisbackend: store %d %s: %w", n, what, c.Err())
		}
	}
	if len(retry) == 0 {
		if err != nil {
			return fmt.Errorf("redisbackend: store %d %s: %w", n, what, err)
		}
		return nil
	}
	if _, err := run(retry, true); err != nil {
		b.noteError(err)
		return fmt.Errorf("redisbackend: store %d %s: %w", n, what, err)
	}
	return nil
}

// storeLua writes KEYS[1] = ARGV[1] with expiry ARGV[2] ms, or deletes the
// key when ARGV[2] is 0, unless the key already holds a later TAT. TATs are
// compared as (microseconds, nanoseconds) pairs, exact in Lua doubles.
//
// A write is one SET ... GET (Redis 6.2 and later): it stores the new TAT
// and returns the old one, and in the rare case the old one was later (a
// write racing a newer one) puts it back, with an expiry at least as long
// as the one it had. Deletes, and servers whose SET has no GET option (the
// call fails and changes nothing), read first with GET.
const storeLua = parseTATLua + `
local new_us, new_ns = parse(ARGV[1])
-- later reports whether the stored raw is a later TAT than ARGV[1].
local function later(raw)
  local cur_us, cur_ns = parse(raw)
  return cur_us and (cur_us > new_us or (cur_us == new_us and cur_ns > new_ns))
end
if ARGV[2] ~= '0' then
  local old = redis.pcall('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'GET')
  if type(old) ~= 'table' then
    if old and later(old) then
      -- old expired ARGV[2] ms plus the gap between the TATs from now; the
      -- gap is rounded up to a whole millisecond and one more.
      local gap_ms = math.floor((parse(old) - new_us) / 1000) + 1
      redis.call('SET', KEYS[1], old, 'PX', tonumber(ARGV[2]) + gap_ms)
      return 0
    end
    return 1
  end
end
local raw = redis.call('GET', KEYS[1])
if raw and later(raw) then
  return 0
end
if ARGV[2] == '0' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
return 1
`

// Time returns the Redis server's TIME in Unix nanoseconds (whole
// microseconds), the time base of every TAT. Bounded by ctx and
// Config.Timeout.
func (b *Backend) Time(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	t, err := b.client.Time(ctx).Result()
	if err != nil {
		b.noteError(err)
		return 0, fmt.Errorf("redisbackend: time: %w", err)
	}
	return t.UnixNano(), nil
}

// formatTAT writes a TAT (Unix nanoseconds) as Redis stores it: whole
// microseconds, then a dot and the three digits of nanoseconds past them
// when those are not zero. A TAT on a whole microsecond is written exactly
// as weir wrote TATs before they had nanoseconds, so the two formats read
// each other's whole-microsecond values; see the package doc.
func formatTAT(ns int64) string {
	us, frac := ns/1000, ns%1000
	if frac == 0 {
		return strconv.FormatInt(us, 10)
	}
	return strconv.FormatInt(us, 10) + "." + fmt.Sprintf("%03d", frac)
}

// parseTAT reads a stored TAT written by formatTAT (or by a version that
// stored whole microseconds) into Unix nanoseconds.
func parseTAT(s string) (int64, error) {
	usPart, nsPart, dotted := strings.Cut(s, ".")
	us, err := strconv.ParseInt(usPart, 10, 64)
	if err != nil || us < 0 || us > MaxTime/1000 || strings.HasPrefix(usPart, "+") {
		return 0, fmt.Errorf("redisbackend: %q is not a tat", s)
	}
	var frac int64
	if dotted {
		if frac, err = strconv.ParseInt(nsPart, 10, 64); err != nil || len(nsPart) != 3 || frac < 0 || strings.HasPrefix(nsPart, "+") {
			return 0, fmt.Errorf("redisbackend: %q is not a tat", s)
		}
	}
	return us*1000 + frac, nil
}

// FormatTAT is formatTAT for the in-memory twin, which must write what a
// Backend writes.
func FormatTAT(ns int64) string { return formatTAT(ns) }
