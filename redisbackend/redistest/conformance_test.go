package redistest_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/permit"
	"github.com/weirhq/weir/redisbackend"
	"github.com/weirhq/weir/redisbackend/redistest"
)

// tatStore is the interface an owner declares for Redis (load, store,
// pipelined decide); both the Backend and its twin satisfy it.
type tatStore interface {
	LoadTATs(ctx context.Context, keys []string) ([]int64, error)
	StoreTATs(ctx context.Context, tats []redisbackend.TAT) error
	DecidePipelined(ctx context.Context, reqs []redisbackend.DecideRequest) ([]redisbackend.Decision, []error, error)
	LoadSets(ctx context.Context, keys []string) ([]*permit.Set, error)
	StoreSets(ctx context.Context, sets []redisbackend.PermitSet) error
}

var (
	_ tatStore = (*redisbackend.Backend)(nil)
	_ tatStore = (*redistest.Memory)(nil)
)

// step is one call: the op says which; the other fields are its input.
type step struct {
	op     redistest.Op
	keys   []string
	tats   []redisbackend.TAT
	decide []redisbackend.DecideRequest
	sets   []redisbackend.PermitSet
	// raw, for opRaw, is written as is (SET key value PX 60000): bytes
	// no weir wrote.
	raw map[string]string
	// canceled runs the call with a context already canceled.
	canceled bool
}

// outcome is everything a call answers, in a comparable form: errors as
// their text and the sentinels callers test for.
type outcome struct {
	TATs      []int64
	Decisions []redisbackend.Decision
	Errs      []string
	Err       string
	CrossSlot []bool
	Invalid   []bool   // wraps gcra.ErrInvalidCost or gcra.ErrInvalidLimit
	Sets      [][]byte // LoadSets's sets, re-encoded; nil for none
	BadSet    bool     // the error wraps redisbackend.ErrBadPermitSet
}

// opRaw writes step.raw through the client (the Backend side) or
// Memory.PutRaw: not a method either twin has.
const opRaw redistest.Op = "raw"

func run(ctx context.Context, s tatStore, st step) outcome {
	var o outcome
	if st.canceled {
		c, cancel := context.WithCancel(ctx)
		cancel()
		ctx = c
	}
	switch st.op {
	case redistest.OpLoad:
		tats, err := s.LoadTATs(ctx, st.keys)
		o.TATs, o.Err = tats, errText(err)
	case redistest.OpStore:
		o.Err = errText(s.StoreTATs(ctx, st.tats))
	case redistest.OpLoadSets:
		sets, err := s.LoadSets(ctx, st.keys)
		o.Err, o.BadSet = errText(err), errors.Is(err, redisbackend.ErrBadPermitSet)
		for _, set := range sets {
			var b []byte
			if set != nil {
				b, _ = set.MarshalBinary()
			}
			o.Sets = append(o.Sets, b)
		}
	case redistest.OpStoreSets:
		o.Err = errText(s.StoreSets(ctx, st.sets))
	case redistest.OpDecide:
		ds, errs, err := s.DecidePipelined(ctx, st.decide)
		o.Decisions, o.Err = ds, errText(err)
		for _, e := range errs {
			o.Errs = append(o.Errs, errText(e))
			o.CrossSlot = append(o.CrossSlot, errors.Is(e, redisbackend.ErrCrossSlot))
			o.Invalid = append(o.Invalid, errors.Is(e, gcra.ErrInvalidCost) || errors.Is(e, gcra.ErrInvalidLimit))
		}
	}
	return o
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

var (
	perSec  = gcra.Limit{Interval: time.Second.Nanoseconds(), Burst: 5}
	perTick = gcra.Limit{Interval: 100 * time.Millisecond.Nanoseconds(), Burst: 2}
	widest  = gcra.Limit{Interval: 1 << 42, Burst: 1 << 10} // span 2^52 = redisbackend.MaxSpan
)

const (
	ka = "weir:{g1}:a:1"
	kb = "weir:{g1}:b:1"
	kc = "weir:{g2}:c:1"
)

func load(keys ...string) step { return step{op: redistest.OpLoad, keys: keys} }

func store(tats ...redisbackend.TAT) step { return step{op: redistest.OpStore, tats: tats} }

func decide(reqs ...redisbackend.DecideRequest) step {
	return step{op: redistest.OpDecide, decide: reqs}
}

func req(now, cost int64, keys []string, limits ...gcra.Limit) redisbackend.DecideRequest {
	return redisbackend.DecideRequest{Keys: keys, Limits: limits, Cost: cost, Now: now}
}

const (
	ms = int64(time.Millisecond)
	s  = int64(time.Second)
)

// conformanceCases are the steps of each case as a function of t0, the
// case's start (Unix nanoseconds, on the machine's clock, which both the
// twin and redis-server read). Every decision names its now, so results
// do not depend on when a step runs; every key written lives at least a
// second (ExpiryGrace), far longer than a case takes.
var conformanceCases = []struct {
	name  string
	steps func(t0 int64) []step
}{
	{"fresh key", func(t0 int64) []step {
		return []step{load(ka), decide(req(t0, 1, []string{ka}, perSec)), load(ka)}
	}},
	{"existing TAT admits", func(t0 int64) []step {
		return []step{
			store(redisbackend.TAT{Key: ka, TAT: t0 + 3*s, Now: t0}),
			decide(req(t0+500*ms, 2, []string{ka}, perSec)), load(ka),
		}
	}},
	{"existing TAT denies, stored TAT unchanged", func(t0 int64) []step {
		return []step{
			store(redisbackend.TAT{Key: ka, TAT: t0 + 4500*ms, Now: t0}),
			decide(req(t0, 1, []string{ka}, perSec)), load(ka),
		}
	}},
	{"clock behind the stored TAT", func(t0 int64) []step {
		return []step{
			store(redisbackend.TAT{Key: ka, TAT: t0 + s, Now: t0}),
			decide(req(t0-2*s, 1, []string{ka}, perSec)), load(ka),
		}
	}},
	{"nanosecond TAT kept exact", func(t0 int64) []step {
		return []step{
			store(redisbackend.TAT{Key: ka, TAT: t0 + 1_234_567, Now: t0}), load(ka),
			decide(req(t0+789, 1, []string{ka}, perSec)), load(ka),
		}
	}},
	{"rested TAT stored deletes the key", func(t0 int64) []step {
		return []step{
			store(redisbackend.TAT{Key: ka, TAT: t0 + 3*s, Now: t0}),
			store(redisbackend.TAT{Key: ka, TAT: t0 + 3*s, Now: t0 + 5*s}), load(ka),
			decide(req(t0, 1, []string{ka}, perSec)),
		}
	}},
	{"past TAT within the grace still reads", func(t0 int64) []step {
		return []step{
			store(redisbackend.TAT{Key: ka, TAT: t0 - ms, Now: t0}), load(ka),
			decide(req(t0, 6, []string{ka}, perSec)), // too costly: reports the stored TAT
		}
	}},
	{"cost above burst", func(t0 int64) []step {
		return []step{
			decide(req(t0, 6, []string{ka}, perSec)),
			decide(req(t0, 3, []string{ka, kb}, perSec, perTick)), load(ka, kb),
		}
	}},
	{"composite with one denying writes nothing", func(t0 int64) []step {
		return []step{
			store(redisbackend.TAT{Key: kb, TAT: t0 + 150*ms, Now: t0}),
			decide(req(t0, 1, []string{ka, kb}, perSec, perTick)), load(ka, kb),
		}
	}},
	{"composite admitted writes every key", func(t0 int64) []step {
		return []step{
			decide(req(t0, 2, []string{ka, kb}, perSec, perTick)), load(ka, kb),
			decide(req(t0, 1, []string{ka, kb}, perSec, perTick)), load(ka, kb),
		}
	}},
	{"store then load across groups", func(t0 int64) []step {
		return []step{
			store(redisbackend.TAT{Key: ka, TAT: t0 + s, Now: t0}, redisbackend.TAT{Key: kc, TAT: t0 + 2*s + 7, Now: t0}),
			load(kc, "weir:{g3}:missing:1", ka, "untagged"),
		}
	}},
	{"store never moves a TAT backwards", func(t0 int64) []step {
		return []step{
			store(redisbackend.TAT{Key: ka, TAT: t0 + 3*s, Now: t0}),
			store(redisbackend.TAT{Key: ka, TAT: t0 + s, Now: t0}), load(ka),
			store(redisbackend.TAT{Key: ka, TAT: t0 - 5*s, Now: t0}), load(ka), // nor deletes a later one
			store(redisbackend.TAT{Key: ka, TAT: t0 + 4*s, Now: t0}), load(ka),
		}
	}},
	{"keys of two groups in one decision", func(t0 int64) []step {
		return []step{
			decide(req(t0, 1, []string{ka, kc}, perSec, perSec), req(t0, 1, []string{kc}, perSec),
				req(t0, 1, []string{"untagged", "other"}, perSec, perSec), req(t0, 1, []string{"untagged"}, perSec)),
			load(ka, kc, "untagged"),
		}
	}},
	{"one pipeline decides in order", func(t0 int64) []step {
		return []step{decide(req(t0, 2, []string{kb}, perTick), req(t0, 1, []string{kb}, perTick), req(t0, 2, []string{ka}, perSec))}
	}},
	{"invalid requests are refused alone", func(t0 int64) []step {
		return []step{decide(
			req(t0, 0, []string{ka}, perSec),
			req(t0, 1, []string{ka, kb}, perSec),
			req(t0, 1, []string{ka, ka}, perSec, perSec),
			req(t0, 1, nil),
			req(t0, 1, []string{ka}, gcra.Limit{Interval: 1 << 43, Burst: 1 << 10}),
			req(t0, 1, []string{ka}, gcra.Limit{Interval: 0, Burst: 1}),
			req(redisbackend.MaxTime+1, 1, []string{ka}, perSec),
			req(-1, 1, []string{ka}, perSec),
			req(t0, 1, []string{kb}, perTick),
		), load(ka, kb)}
	}},
	{"invalid store applies nothing", func(t0 int64) []step {
		return []step{
			store(redisbackend.TAT{Key: ka, TAT: t0 + s, Now: t0}, redisbackend.TAT{Key: kb, TAT: t0, Now: 0}),
			store(redisbackend.TAT{Key: "", TAT: t0, Now: t0}),
			store(redisbackend.TAT{Key: ka, TAT: redisbackend.MaxTime + 1, Now: t0}),
			store(redisbackend.TAT{Key: ka, TAT: -1, Now: t0}), load(ka, kb),
		}
	}},
	{"a key too far ahead for exact time", func(t0 int64) []step {
		return []step{
			store(redisbackend.TAT{Key: ka, TAT: t0 + 1<<52 + 1e15, Now: t0}),
			decide(req(t0, 1, []string{ka}, widest), req(t0, 1, []string{kb}, perTick)),
			decide(req(t0, 1, []string{ka}, perSec)), load(ka, kb),
		}
	}},
	{"a canceled call applies nothing", func(t0 int64) []step {
		st := store(redisbackend.TAT{Key: ka, TAT: t0 + s, Now: t0})
		ld := load(ka, kc)
		dc := decide(req(t0, 1, []string{kb}, perSec), req(t0, 0, []string{kb}, perSec))
		st.canceled, ld.canceled, dc.canceled = true, true, true
		return []step{st, ld, dc, load(ka, kb)}
	}},
	{"empty calls", func(int64) []step {
		return []step{load(), store(), decide(), loadSets(), storeSets()}
	}},
}

func init() { conformanceCases = append(conformanceCases, setCases...) }

// TestMemory_conformsToBackend runs every case against a Backend on a real
// redis-server and against a Memory, and requires identical answers.
func TestMemory_conformsToBackend(t *testing.T) {
	srv := redistest.Start(t)
	conform(t, srv.Client(), func(ctx context.Context) error { return srv.Client().FlushAll(ctx).Err() })
}

// TestMemory_conformsToBackend_cluster runs the cases against a Backend on
// a Redis Cluster, where loads are split by slot: the twin models a single
// Redis, and the answers must not tell the two apart.
func TestMemory_conformsToBackend_cluster(t *testing.T) {
	cc := redistest.StartCluster(t, 3).ClusterClient()
	conform(t, cc, func(ctx context.Context) error {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return c.FlushAll(ctx).Err() })
	})
}

func conform(t *testing.T, client redis.UniversalClient, flush func(context.Context) error) {
	cfg := redisbackend.DefaultConfig()
	// Answers are compared here, not latencies: on a loaded machine the
	// default 50ms would turn a semantic comparison into a timeout.
	cfg.Timeout = 10 * time.Second
	be, err := redisbackend.New(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range conformanceCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			if err := flush(ctx); err != nil {
				t.Fatal(err)
			}
			mem := redistest.NewMemory(clock.Real()) // the clock redis-server reads
			t0 := time.Now().Truncate(time.Microsecond).UnixNano()
			start := time.Now()
			for i, st := range tc.steps(t0) {
				if st.op == opRaw {
					for k, v := range st.raw {
						if err := client.Set(ctx, k, v, time.Minute).Err(); err != nil {
							t.Fatal(err)
						}
						mem.PutRaw(k, []byte(v), time.Minute)
					}
					continue
				}
				want, got := run(ctx, be, st), run(ctx, mem, st)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("step %d (%s):\nmemory:  %s\nbackend: %s", i, st.op, show(got), show(want))
				}
				compareExpiry(t, i, client, mem, start)
			}
		})
	}
}

// compareExpiry checks that every key of the cases lives on as long in
// the twin as in Redis. The two wrote, and now read, at instants apart by
// less than the time since the case started, and each counts whole
// milliseconds, so their TTLs may differ by that time and 2ms.
func compareExpiry(t *testing.T, step int, client redis.UniversalClient, mem *redistest.Memory, start time.Time) {
	t.Helper()
	for _, k := range []string{ka, kb, kc, "untagged"} {
		pttl, err := client.PTTL(t.Context(), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		ttl, ok := mem.TTL(k)
		slack := time.Since(start) + 2*time.Millisecond
		switch {
		case pttl < 0 && ok, pttl >= 0 && !ok:
			t.Fatalf("after step %d key %s: memory lives %v (%s), redis pttl %s", step, k, ok, ttl, pttl)
		case ok && (ttl-pttl > slack || pttl-ttl > slack):
			t.Fatalf("after step %d key %s: memory ttl %s, redis pttl %s (slack %s)", step, k, ttl, pttl, slack)
		}
	}
}

func show(o outcome) string { return fmt.Sprintf("%+v", o) }

// TestMemory_conformsToBackend_serverTime compares decisions at the
// server's clock (now = 0, as strict limits decide): each side decides at
// its own instant, so results are compared relative to Decision.Now.
func TestMemory_conformsToBackend_serverTime(t *testing.T) {
	srv := redistest.Start(t)
	cfg := redisbackend.DefaultConfig()
	cfg.Timeout = 10 * time.Second // as in TestMemory_conformsToBackend
	be, err := redisbackend.New(srv.Client(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	hour := gcra.Limit{Interval: time.Hour.Nanoseconds(), Burst: 5}
	steps := []redisbackend.DecideRequest{
		req(0, 3, []string{ka, kb}, hour, hour),
		req(0, 3, []string{ka}, hour), // denied: 2 left
		req(0, 2, []string{ka}, hour),
		req(0, 6, []string{kb}, hour),
	}
	var sides [2][]string
	for i, side := range []tatStore{be, redistest.NewMemory(clock.Real())} {
		var first int64
		for j, r := range steps {
			before := time.Now().Truncate(time.Microsecond).UnixNano()
			ds, errs, err := side.DecidePipelined(t.Context(), []redisbackend.DecideRequest{r})
			if err != nil || errs[0] != nil {
				t.Fatalf("side %d step %d: %v %v", i, j, err, errs)
			}
			d := ds[0]
			if d.Now < before || d.Now > time.Now().UnixNano() || d.Now%1000 != 0 {
				t.Errorf("side %d step %d: decided at %d, not a whole microsecond of the call", i, j, d.Now)
			}
			if j == 0 {
				first = d.Now
			}
			sides[i] = append(sides[i], relative(d, first))
		}
		tats, err := side.LoadTATs(t.Context(), []string{ka, kb})
		if err != nil {
			t.Fatal(err)
		}
		sides[i] = append(sides[i], fmt.Sprintf("tats %d %d", tats[0]-first, tats[1]-first))
	}
	if !reflect.DeepEqual(sides[0], sides[1]) {
		t.Fatalf("at the server's time:\nbackend: %q\nmemory:  %q", sides[0], sides[1])
	}
}

// relative prints d with instants relative to the first decision's now and
// durations as instants (now + duration), which do not move with the
// moment a step ran; Remaining and the flags cannot move within an hour.
func relative(d redisbackend.Decision, first int64) string {
	out := fmt.Sprintf("allowed=%v costly=%v rem=%d", d.Overall.Allowed, d.Overall.TooCostly, d.Overall.Remaining)
	for _, r := range d.Results {
		at := func(dur int64) int64 { return d.Now + dur - first }
		if r.RetryAfter == 0 {
			at = func(int64) int64 { return 0 }
		}
		out += fmt.Sprintf(" [%v %v tat=%d retry_at=%d rem=%d reset_at=%d]", r.Allowed, r.TooCostly,
			r.TAT-first, at(r.RetryAfter), r.Remaining, d.Now+r.ResetAfter-first)
	}
	return out
}
