package redistest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/redisbackend"
)

// exactLimit is 2^53, beyond which the Backend's script (Lua doubles) is no
// longer exact and refuses to decide.
const exactLimit = int64(1) << 53

// errOutOfRange is the script's reply when a key is too far ahead of now
// for doubles to stay exact; Memory answers the same error, as a reply.
const errOutOfRange = replyError("redisbackend: time out of exact range")

// replyError is an error Redis answered (the command ran and failed), as
// go-redis reports one: it satisfies redis.Error.
type replyError string

func (e replyError) Error() string { return string(e) }

// RedisError marks e as a server reply, as go-redis's own errors are.
func (replyError) RedisError() {}

var _ redis.Error = replyError("")

// Memory is an in-memory twin of the three [redisbackend.Backend] methods
// an owner uses: LoadTATs, StoreTATs and DecidePipelined. For the same
// stored TATs, clock and input it returns what a Backend on a single Redis
// returns: the same validation errors (it calls the Backend's own
// Validate methods), the same results (GCRA by package gcra, computed on
// how far each key is ahead of now as the script does), the same PX expiry
// at its clock (a key lives until its expiry's millisecond has passed, then
// reads as missing, which is 0), the same error wrapping, and the same
// all-or-nothing composites. The conformance test of this package runs one
// table against both and requires identical answers.
//
// Its clock stands for the Redis server's: a decision with Now == 0 decides
// at it (truncated to whole microseconds, as TIME is), and every expiry is
// counted on it. Advance it to expire keys.
//
// It also twins LoadSets and StoreSets, the permit sets of concurrency keys
// (permitsets.go). A key holds a TAT or a set; LoadTATs of a set fails as
// the Backend's does, and a decision reads a set as a missing key (the
// Backend's script would refuse it; owners never decide a concurrency key
// by script).
//
// It differs from a Backend on purpose in three ways: it has no Config
// timeout (a blocked or delayed call is bounded by its context alone; the
// owner always passes a deadline), a pipeline is applied in one step (Redis
// may run other clients' commands between a pipeline's scripts, never within
// one), and it cannot hold a key that is neither a TAT nor a permit set.
//
// Faults (see [Memory.FailNext], [Memory.Delay], [Memory.Block]) apply only
// to calls that would reach Redis: a call refused by validation, or with
// nothing to send, returns as the Backend's does without waiting or
// failing. Every call is counted ([Memory.Calls]).
//
// A Memory is safe for concurrent use. Concurrency idiom: one mutex guards
// the keys, counts, faults and gates; a call waits at gates and delays
// without it, then does all its work under one hold of it, so each call is
// atomic.
type Memory struct {
	clk clock.Clock
	mu  struct {
		sync.Mutex
		keys    map[string]entry
		calls   map[Op]int
		faults  []*fault
		delays  map[Op]time.Duration
		gates   []*gate
		waiting map[Op]int    // calls held at a gate, by method
		changed chan struct{} // closed and replaced when waiting changes
	}
}

// entry is one stored key: its TAT (Unix nanoseconds) and the Unix
// millisecond of its expiry. As in Redis, the key lives while the clock's
// millisecond is at or before expireMs.
type entry struct {
	tat      int64
	expireMs int64
	set      []byte // a permit set's snapshot (StoreSets); tat is then 0
}

// NewMemory returns an empty twin whose clock is clk (a
// clocktest.Manual in unit tests; nil means clock.Real()). Only its Now is
// read: delays run on real time (see [Memory.Delay]).
func NewMemory(clk clock.Clock) *Memory {
	if clk == nil {
		clk = clock.Real()
	}
	m := &Memory{clk: clk}
	m.mu.keys = make(map[string]entry)
	m.mu.calls = make(map[Op]int)
	m.mu.delays = make(map[Op]time.Duration)
	m.mu.waiting = make(map[Op]int)
	m.mu.changed = make(chan struct{})
	return m
}

// LoadTATs is [redisbackend.Backend.LoadTATs]: one TAT per key, 0 for a
// missing or expired key; keys need not share a hash tag. No keys returns
// nil, nil.
func (m *Memory) LoadTATs(ctx context.Context, keys []string) ([]int64, error) {
	m.count(OpLoad)
	if len(keys) == 0 {
		return nil, nil
	}
	var bad error
	tats, err := do(ctx, m, OpLoad, func(now int64) []int64 {
		out := make([]int64, len(keys))
		for i, k := range keys {
			out[i], _ = m.liveLocked(k, now)
			if set := m.mu.keys[k].set; set != nil && bad == nil {
				bad = fmt.Errorf("redisbackend: key %q: redisbackend: %q is not a tat", k, string(set))
			}
		}
		return out
	})
	if err != nil {
		return nil, fmt.Errorf("redisbackend: load %d tats: %w", len(keys), err)
	}
	if bad != nil {
		return nil, bad
	}
	return tats, nil
}

// StoreTATs is [redisbackend.Backend.StoreTATs]: each TAT with PX expiry
// ceil((TAT-Now)/1ms)+1ms plus redisbackend.ExpiryGrace, counted from the
// twin's clock; a TAT more than the grace before its Now deletes its key;
// a write never replaces a later stored TAT. Invalid input fails the call
// before anything is applied.
func (m *Memory) StoreTATs(ctx context.Context, tats []redisbackend.TAT) error {
	m.count(OpStore)
	for _, t := range tats {
		if err := t.Validate(); err != nil {
			return err
		}
	}
	if len(tats) == 0 {
		return nil
	}
	_, err := do(ctx, m, OpStore, func(now int64) struct{} {
		for _, t := range tats {
			m.storeLocked(t, now)
		}
		return struct{}{}
	})
	if err != nil {
		return fmt.Errorf("redisbackend: store %d tats: %w", len(tats), err)
	}
	return nil
}

// DecidePipelined is [redisbackend.Backend.DecidePipelined]: one decision
// per request, each atomic on its own and applied in order; a request that
// fails validation (ErrCrossSlot among them) gets its error and the others
// still run. An injected transport failure fails every request sent and is
// also the last result; an injected Redis reply error (a redis.Error) fails
// every request sent and leaves the last result nil, as on a Backend.
func (m *Memory) DecidePipelined(ctx context.Context, reqs []redisbackend.DecideRequest) ([]redisbackend.Decision, []error, error) {
	m.count(OpDecide)
	decisions := make([]redisbackend.Decision, len(reqs))
	errs := make([]error, len(reqs))
	var send []int
	for i, r := range reqs {
		if errs[i] = r.Validate(); errs[i] == nil {
			send = append(send, i)
		}
	}
	if len(send) == 0 {
		return decisions, errs, nil
	}
	_, err := do(ctx, m, OpDecide, func(now int64) struct{} {
		for _, i := range send {
			decisions[i], errs[i] = m.decideLocked(reqs[i], now)
		}
		return struct{}{}
	})
	var transport error
	for _, i := range send {
		if err != nil {
			decisions[i], errs[i] = redisbackend.Decision{}, err
		}
		if errs[i] != nil {
			errs[i] = fmt.Errorf("redisbackend: pipelined decide %q: %w", reqs[i].Keys[0], errs[i])
			if transport == nil && !isReply(errs[i]) {
				transport = errs[i]
			}
		}
	}
	return decisions, errs, transport
}

// decideLocked is the Backend's script on the twin's state, at clock (Unix
// nanoseconds). Like the script, it works on how far each key is ahead of
// now: gcra decides at 0 on TATs relative to now, so no instant up to
// redisbackend.MaxTime is clamped by gcra.MaxTime.
func (m *Memory) decideLocked(r redisbackend.DecideRequest, clock int64) (redisbackend.Decision, error) {
	now, grace := r.Now, redisbackend.ExpiryGrace.Milliseconds()
	if now == 0 { // the server's TIME: whole microseconds, exact expiry
		now, grace = clock/1000*1000, 0
	}
	rel := make([]int64, len(r.Keys))
	for i, k := range r.Keys {
		tat, _ := m.liveLocked(k, clock)
		if max(tat-now, 0)+r.Limits[i].Span() >= exactLimit {
			return redisbackend.Decision{}, errOutOfRange
		}
		rel[i] = tat - now
	}
	out := make([]gcra.Result, len(r.Keys))
	agg, err := gcra.DecideComposite(rel, 0, r.Limits, r.Cost, out)
	if err != nil { // Validate let it through: a twin's bug, not the caller's
		return redisbackend.Decision{}, fmt.Errorf("redistest: %w", err)
	}
	for i := range out {
		out[i].TAT += now
	}
	if agg.Allowed {
		for i, k := range r.Keys {
			px := (out[i].ResetAfter+999_999)/1_000_000 + 1 + grace
			m.mu.keys[k] = entry{tat: out[i].TAT, expireMs: clock/1_000_000 + px}
		}
	}
	return redisbackend.Decision{Overall: agg, Results: out, Now: now}, nil
}

// storeLocked is the Backend's store script for one TAT at clock.
func (m *Memory) storeLocked(t redisbackend.TAT, clock int64) {
	if cur, ok := m.liveLocked(t.Key, clock); ok && cur > t.TAT {
		return // never move a TAT backwards
	}
	grace := redisbackend.ExpiryGrace
	if t.TAT+grace.Nanoseconds() <= t.Now {
		delete(m.mu.keys, t.Key) // rested on any clock: as missing
		return
	}
	px := (t.TAT-t.Now+999_999)/1_000_000 + 1 + grace.Milliseconds()
	m.mu.keys[t.Key] = entry{tat: t.TAT, expireMs: clock/1_000_000 + px}
}

// liveLocked returns key's TAT when it has not expired at clock (Unix
// nanoseconds), and forgets it when it has, as Redis does on access.
func (m *Memory) liveLocked(key string, clock int64) (int64, bool) {
	e, ok := m.mu.keys[key]
	if !ok {
		return 0, false
	}
	if clock/1_000_000 > e.expireMs {
		delete(m.mu.keys, key)
		return 0, false
	}
	return e.tat, true
}

// TAT returns the TAT stored for key at the twin's clock, and false when
// the key is missing or expired. It is not counted and no fault applies.
func (m *Memory) TAT(key string) (int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.liveLocked(key, m.clk.Now().UnixNano())
}

// TTL returns how long key lives from the twin's clock on, in whole
// milliseconds as Redis's PTTL answers, and false when the key is missing
// or expired. It is not counted and no fault applies.
func (m *Memory) TTL(key string) (time.Duration, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clk.Now().UnixNano()
	if _, ok := m.liveLocked(key, now); !ok {
		return 0, false
	}
	return time.Duration(m.mu.keys[key].expireMs-now/1_000_000) * time.Millisecond, true
}

// Len returns how many keys live at the twin's clock.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clk.Now().UnixNano()
	for k := range m.mu.keys {
		m.liveLocked(k, now)
	}
	return len(m.mu.keys)
}

// FlushAll forgets every key, as a Redis restarted without persistence.
// Faults and counts stay.
func (m *Memory) FlushAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.mu.keys)
}

// isReply reports whether err is an error Redis answered rather than a
// transport or context failure, as the Backend tells them apart.
func isReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled)
}
