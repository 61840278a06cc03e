package redistest_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weirhq/weir/clock/clocktest"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/redisbackend"
	"github.com/weirhq/weir/redisbackend/redistest"
)

func newTwin() (*redistest.Memory, *clocktest.Manual) {
	c := clocktest.NewManual(base)
	return redistest.NewMemory(c), c
}

func unixNano(c *clocktest.Manual) int64 { return c.Now().UnixNano() }

// base is a whole second, so millisecond boundaries are easy to read.
var base = time.Unix(1_764_582_000, 0)

func mustStore(t *testing.T, m *redistest.Memory, tats ...redisbackend.TAT) {
	t.Helper()
	if err := m.StoreTATs(t.Context(), tats); err != nil {
		t.Fatal(err)
	}
}

func mustDecide(t *testing.T, m *redistest.Memory, r redisbackend.DecideRequest) redisbackend.Decision {
	t.Helper()
	ds, errs, err := m.DecidePipelined(t.Context(), []redisbackend.DecideRequest{r})
	if err != nil || errs[0] != nil {
		t.Fatalf("decide: %v, %v", err, errs[0])
	}
	return ds[0]
}

func TestMemory_StoreTATs_expiresAfterPXMillisecond(t *testing.T) {
	m, c := newTwin()
	now := unixNano(c)
	mustStore(t, m, redisbackend.TAT{Key: ka, TAT: now + 10*ms, Now: now})
	// PX = 10ms + 1ms + ExpiryGrace: the key lives through that millisecond.
	live := 1011 * time.Millisecond
	c.Advance(live + time.Millisecond - 1)
	if got, ok := m.TAT(ka); !ok || got != now+10*ms {
		t.Fatalf("at +%s: tat %d, %v; want %d", live+time.Millisecond-1, got, ok, now+10*ms)
	}
	c.Advance(1)
	if got, ok := m.TAT(ka); ok {
		t.Fatalf("at +%s: key still holds %d", live+time.Millisecond, got)
	}
	tats, err := m.LoadTATs(t.Context(), []string{ka})
	if err != nil || tats[0] != 0 {
		t.Fatalf("load of an expired key = %v, %v; want [0]", tats, err)
	}
}

func TestMemory_DecidePipelined_serverTimeExpiresWithoutGrace(t *testing.T) {
	m, c := newTwin()
	c.Advance(1234) // not a whole microsecond: TIME has whole microseconds
	l := gcra.Limit{Interval: 10 * ms, Burst: 1}
	d := mustDecide(t, m, req(0, 1, []string{ka}, l))
	if want := base.UnixNano() + 1000; d.Now != want || d.Results[0].TAT != want+10*ms {
		t.Fatalf("decided at %d with tat %d; want %d and %d", d.Now, d.Results[0].TAT, want, want+10*ms)
	}
	if ttl, ok := m.TTL(ka); !ok || ttl != 11*time.Millisecond {
		t.Fatalf("ttl %s, %v; want 11ms (reset 10ms + 1ms, no grace)", ttl, ok)
	}
	d = mustDecide(t, m, req(base.UnixNano()+2000, 1, []string{kb}, l)) // explicit now: grace
	if ttl, _ := m.TTL(kb); ttl != 1011*time.Millisecond || d.Now != base.UnixNano()+2000 {
		t.Fatalf("explicit now: ttl %s at %d; want 1.011s at the request's now", ttl, d.Now)
	}
	c.Advance(12 * time.Millisecond)
	if _, ok := m.TAT(ka); ok {
		t.Fatal("server-time key lives past its expiry")
	}
	if d := mustDecide(t, m, req(0, 1, []string{ka}, l)); !d.Overall.Allowed {
		t.Fatalf("expired key decided %+v; want admitted as rested", d.Overall)
	}
}

func TestMemory_FailNext_failsWithoutEffect(t *testing.T) {
	m, c := newTwin()
	now := unixNano(c)
	m.FailNext(redistest.OpStore, 2, redistest.Refused())
	for range 2 {
		err := m.StoreTATs(t.Context(), []redisbackend.TAT{{Key: ka, TAT: now + s, Now: now}})
		if redisbackend.Classify(err) != redisbackend.ClassUnreachable || !strings.HasPrefix(errText(err), "redisbackend: store 1 tats: ") {
			t.Fatalf("store = %v (class %q); want an unreachable store error", err, redisbackend.Classify(err))
		}
	}
	if _, ok := m.TAT(ka); ok {
		t.Fatal("a failed store was applied")
	}
	mustStore(t, m, redisbackend.TAT{Key: ka, TAT: now + s, Now: now})
	m.FailNext(redistest.AnyOp, 1, context.DeadlineExceeded)
	if _, err := m.LoadTATs(t.Context(), []string{ka}); redisbackend.Classify(err) != redisbackend.ClassTimeout {
		t.Fatalf("load = %v; want a timeout", err)
	}
	if tats, err := m.LoadTATs(t.Context(), []string{ka}); err != nil || tats[0] != now+s {
		t.Fatalf("load after the fault = %v, %v", tats, err)
	}
}

func TestMemory_FailNextApplied_appliesThenFails(t *testing.T) {
	m, c := newTwin()
	m.FailNextApplied(redistest.OpDecide, 1, context.DeadlineExceeded)
	ds, errs, err := m.DecidePipelined(t.Context(), []redisbackend.DecideRequest{req(unixNano(c), 1, []string{ka}, perSec)})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(errs[0], context.DeadlineExceeded) || ds[0].Results != nil {
		t.Fatalf("decide = %+v, %v, %v; want the timeout on the item and the call", ds, errs, err)
	}
	if got, ok := m.TAT(ka); !ok || got != unixNano(c)+s {
		t.Fatalf("tat %d, %v: the decision was not applied", got, ok)
	}
}

// reply is an error Redis answered, as a redis.Error.
type reply string

func (r reply) Error() string { return string(r) }
func (reply) RedisError()     {}

func TestMemory_DecidePipelined_injectedFailures(t *testing.T) {
	m, c := newTwin()
	now := unixNano(c)
	bad := req(now, 0, []string{kb}, perSec)
	// Nothing valid to send: the fault waits for a call that reaches Redis.
	m.FailNext(redistest.OpDecide, 1, redistest.Refused())
	if _, errs, err := m.DecidePipelined(t.Context(), []redisbackend.DecideRequest{bad}); err != nil || !errors.Is(errs[0], gcra.ErrInvalidCost) {
		t.Fatalf("invalid alone = %v, %v", errs, err)
	}
	_, errs, err := m.DecidePipelined(t.Context(), []redisbackend.DecideRequest{req(now, 1, []string{ka}, perSec), bad})
	if redisbackend.Classify(err) != redisbackend.ClassUnreachable || err != errs[0] || !errors.Is(errs[1], gcra.ErrInvalidCost) {
		t.Fatalf("transport failure = %v, %v; want it on the sent item and the call, the invalid one's own error", errs, err)
	}
	m.FailNext(redistest.OpDecide, 1, reply("READONLY You can't write against a read only replica."))
	_, errs, err = m.DecidePipelined(t.Context(), []redisbackend.DecideRequest{req(now, 1, []string{ka}, perSec)})
	if err != nil || !strings.Contains(errText(errs[0]), "READONLY") {
		t.Fatalf("reply error = %v, %v; want it on the item only, as the Backend reports replies", errs, err)
	}
	if _, ok := m.TAT(ka); ok {
		t.Fatal("a failed decision was applied")
	}
}

func TestMemory_Block_holdsUntilReleased(t *testing.T) {
	m, c := newTwin()
	release := m.Block(redistest.OpDecide)
	done := make(chan error, 1)
	go func() {
		_, errs, err := m.DecidePipelined(context.Background(), []redisbackend.DecideRequest{req(unixNano(c), 1, []string{ka}, perSec)})
		done <- errors.Join(err, errs[0])
	}()
	if err := m.WaitBlocked(t.Context(), redistest.OpDecide, 1); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.TAT(ka); ok {
		t.Fatal("a blocked decision was applied")
	}
	if _, err := m.LoadTATs(t.Context(), []string{ka}); err != nil { // other methods pass
		t.Fatal(err)
	}
	release()
	release() // twice is fine
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, ok := m.TAT(ka); !ok {
		t.Fatal("the released decision was not applied")
	}
}

func TestMemory_Block_contextEndsTheWait(t *testing.T) {
	m, c := newTwin()
	defer m.Block(redistest.AnyOp)()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- m.StoreTATs(ctx, []redisbackend.TAT{{Key: ka, TAT: unixNano(c) + s, Now: unixNano(c)}})
	}()
	if err := m.WaitBlocked(t.Context(), redistest.AnyOp, 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || redisbackend.Classify(err) != redisbackend.ClassTimeout {
		t.Fatalf("store = %v; want the context's error", err)
	}
	if _, ok := m.TAT(ka); ok {
		t.Fatal("a store that gave up was applied")
	}
	wctx, wcancel := context.WithCancel(t.Context())
	wcancel()
	if err := m.WaitBlocked(wctx, redistest.OpLoad, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitBlocked with nothing blocked = %v; want the context's error", err)
	}
}

func TestMemory_Delay_racesTheDeadline(t *testing.T) {
	m, _ := newTwin()
	m.Delay(redistest.OpLoad, time.Hour)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if _, err := m.LoadTATs(ctx, []string{ka}); redisbackend.Classify(err) != redisbackend.ClassTimeout {
		t.Fatalf("delayed load = %v; want a timeout", err)
	}
	m.Delay(redistest.OpLoad, 0)
	m.Delay(redistest.AnyOp, 20*time.Millisecond)
	start := time.Now()
	if _, err := m.LoadTATs(t.Context(), []string{ka}); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 20*time.Millisecond {
		t.Fatalf("load took %s; want at least the 20ms delay", el)
	}
}

func TestMemory_Calls_countsEveryCall(t *testing.T) {
	m, c := newTwin()
	now := unixNano(c)
	_, _ = m.LoadTATs(t.Context(), nil)
	_, _ = m.LoadTATs(t.Context(), []string{ka})
	_ = m.StoreTATs(t.Context(), []redisbackend.TAT{{Key: ka, Now: 0}}) // invalid
	_, _, _ = m.DecidePipelined(t.Context(), []redisbackend.DecideRequest{req(now, 1, []string{ka}, perSec)})
	for op, want := range map[redistest.Op]int{redistest.OpLoad: 2, redistest.OpStore: 1, redistest.OpDecide: 1, redistest.AnyOp: 4} {
		if got := m.Calls(op); got != want {
			t.Errorf("Calls(%q) = %d, want %d", op, got, want)
		}
	}
}

func TestMemory_FlushAll_forgetsKeys(t *testing.T) {
	m, c := newTwin()
	mustStore(t, m, redisbackend.TAT{Key: ka, TAT: unixNano(c) + s, Now: unixNano(c)})
	if m.Len() != 1 {
		t.Fatalf("Len = %d, want 1", m.Len())
	}
	m.FlushAll()
	if m.Len() != 0 {
		t.Fatalf("Len after FlushAll = %d", m.Len())
	}
}

// TestMemory_DecidePipelined_concurrentDecisionsAreAtomic: callers racing
// on one composite admit exactly the burst, never more.
func TestMemory_DecidePipelined_concurrentDecisionsAreAtomic(t *testing.T) {
	m, c := newTwin()
	l := gcra.Limit{Interval: time.Hour.Nanoseconds(), Burst: 100}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				ds, errs, err := m.DecidePipelined(t.Context(), []redisbackend.DecideRequest{req(unixNano(c), 1, []string{ka, kb}, l, perSec)})
				if err != nil || errs[0] != nil {
					t.Errorf("decide: %v, %v", err, errs[0])
					return
				}
				if ds[0].Overall.Allowed {
					admitted.Add(1)
				}
				c.Advance(time.Second) // perSec keeps admitting
			}
		})
	}
	wg.Wait()
	if admitted.Load() != 100 {
		t.Fatalf("admitted %d of 400 against a burst of 100", admitted.Load())
	}
}

func TestNewMemory_nilClockIsReal(t *testing.T) {
	m := redistest.NewMemory(nil)
	before := time.Now().Truncate(time.Microsecond).UnixNano()
	d := mustDecide(t, m, req(0, 1, []string{ka}, perSec))
	if d.Now < before || d.Now > time.Now().UnixNano() {
		t.Fatalf("decided at %d, not within the call (from %d)", d.Now, before)
	}
}

func TestMemory_FailNext_earliestFaultFirst(t *testing.T) {
	m, _ := newTwin()
	m.FailNext(redistest.AnyOp, 1, context.DeadlineExceeded)
	m.FailNext(redistest.OpLoad, 1, redistest.Refused())
	var classes []string
	for range 3 {
		_, err := m.LoadTATs(t.Context(), []string{ka})
		classes = append(classes, redisbackend.Classify(err))
	}
	if want := []string{redisbackend.ClassTimeout, redisbackend.ClassUnreachable, redisbackend.ClassNone}; !slices.Equal(classes, want) {
		t.Fatalf("load classes %q, want %q", classes, want)
	}
}
