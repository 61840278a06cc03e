package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxStoredTAT bounds stored TATs: the script reads them as Lua doubles.
const maxStoredTAT = int64(1) << 53

// TAT is one key's state for [Backend.StoreTATs]: its theoretical arrival
// time and the now (microseconds, Redis time base) it is current at.
type TAT struct {
	Key string
	TAT int64
	Now int64
}

// LoadTATs reads the TATs of keys in one pipeline (split by slot on
// Cluster). The result has one entry per key, 0 for a missing key, which
// gcra treats as rested. The keys need not share a hash tag. The first
// failure fails the whole call; bounded by ctx and Config.Timeout.
func (b *Backend) LoadTATs(ctx context.Context, keys []string) ([]int64, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	pipe := b.client.Pipeline()
	cmds := make([]*redis.StringCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.Get(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("redisbackend: load %d tats: %w", len(keys), err)
	}
	tats := make([]int64, len(keys))
	for i, c := range cmds {
		s, err := c.Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("redisbackend: load tat %q: %w", keys[i], err)
		}
		if tats[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			return nil, fmt.Errorf("redisbackend: key %q holds %q, not a tat: %w", keys[i], s, err)
		}
	}
	return tats, nil
}

// ExpiryGrace is added to the expiry of every TAT written on a caller's
// time base (StoreTATs, and Decide with an explicit now). That base differs
// from Redis's own clock by the caller's offset error and the write's
// transit time; a key that expired before its TAT passed would grant a
// burst early, while one that lives on past its TAT decides exactly like a
// missing key. So keys are kept a little too long, never too short.
const ExpiryGrace = time.Second

// StoreTATs writes TATs in one pipeline (split by slot on Cluster), each
// with PX expiry ceil((TAT-Now)/1000)+1 milliseconds plus ExpiryGrace. A TAT
// more than ExpiryGrace before its Now is rested on any clock, which reads
// the same as a missing key, so its key is deleted instead. A write never moves a stored TAT
// backwards (nor deletes a later one): when two nodes both believed they
// owned a key — a partition, a frozen owner's buffered writes arriving after
// its successor's — Redis keeps the later TAT, the one that has admitted
// more. Each Now must be positive and each TAT in
// [0, 2^53); invalid input fails the call before anything is sent. Bounded
// by ctx and Config.Timeout; on failure some writes may have been applied.
func (b *Backend) StoreTATs(ctx context.Context, tats []TAT) error {
	for _, t := range tats {
		if t.Key == "" || t.Now <= 0 || t.TAT < 0 || t.TAT >= maxStoredTAT {
			return fmt.Errorf("redisbackend: invalid tat %+v: need a key, now > 0 and 0 <= tat < 2^53", t)
		}
	}
	if len(tats) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	cmds, err := b.runStore(ctx, tats, false)
	var retry []TAT
	for i, c := range cmds {
		switch {
		case isNoScript(c.Err()):
			retry = append(retry, tats[i])
		case c.Err() != nil:
			return fmt.Errorf("redisbackend: store %d tats: %w", len(tats), c.Err())
		}
	}
	if len(retry) == 0 {
		if err != nil {
			return fmt.Errorf("redisbackend: store %d tats: %w", len(tats), err)
		}
		return nil
	}
	// The server lost its script cache; those writes did not run.
	if _, err := b.runStore(ctx, retry, true); err != nil {
		return fmt.Errorf("redisbackend: store %d tats: %w", len(tats), err)
	}
	return nil
}

// runStore queues one store script call per TAT (EVALSHA, or EVAL when
// full) and executes them.
func (b *Backend) runStore(ctx context.Context, tats []TAT, full bool) ([]*redis.Cmd, error) {
	pipe := b.client.Pipeline()
	cmds := make([]*redis.Cmd, len(tats))
	for i, t := range tats {
		// A TAT more than the grace in the past is deleted (px 0).
		px := int64(0)
		if t.TAT+ExpiryGrace.Microseconds() > t.Now {
			px = (t.TAT-t.Now+999)/1000 + 1 + ExpiryGrace.Milliseconds()
		}
		cmds[i] = queueScript(ctx, pipe, b.store, full, []string{t.Key}, strconv.FormatInt(t.TAT, 10), strconv.FormatInt(px, 10))
	}
	_, err := pipe.Exec(ctx)
	return cmds, err
}

// storeLua writes KEYS[1] = ARGV[1] with expiry ARGV[2] ms, or deletes the
// key when ARGV[2] is 0, unless the key already holds a later TAT.
const storeLua = `
local cur = tonumber(redis.call('GET', KEYS[1]))
if cur and cur > tonumber(ARGV[1]) then
  return 0
end
if ARGV[2] == '0' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
return 1
`

// Time returns the Redis server's TIME in microseconds, the time base of
// every TAT. Bounded by ctx and Config.Timeout.
func (b *Backend) Time(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	t, err := b.client.Time(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("redisbackend: time: %w", err)
	}
	return t.UnixMicro(), nil
}
