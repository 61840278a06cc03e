package redisbackend_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/redisbackend"
	"github.com/weirhq/weir/redisbackend/redistest"
)

func TestBackend_StoreLoadTATs_roundTrip(t *testing.T) {
	c, b, now := startBackend(t)
	ctx := t.Context()
	tats := []redisbackend.TAT{
		{Key: "rl:{p}:ahead", TAT: now + 2500*ms, Now: now}, // 2.5s ahead
		{Key: "rl:{p}:tiny", TAT: now + 1, Now: now},        // 1ns ahead
		{Key: "rl:{p}:rested", TAT: now, Now: now},          // at now: rested, kept for the grace
		{Key: "rl:{p}:past", TAT: now - 2000*ms, Now: now},  // behind by more than the grace: deleted
	}
	// Stale values that the rested entries must remove.
	for _, k := range []string{"rl:{p}:rested", "rl:{p}:past"} {
		c.Set(ctx, k, "123", 0)
	}
	if err := b.StoreTATs(ctx, tats); err != nil {
		t.Fatal(err)
	}
	got, err := b.LoadTATs(ctx, []string{"rl:{p}:ahead", "rl:{p}:tiny", "rl:{p}:rested", "rl:{p}:past", "rl:{p}:never"})
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{now + 2500*ms, now + 1, now, 0, 0}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("loaded %v, want %v", got, want)
	}
	if ttl := c.PTTL(ctx, "rl:{p}:ahead").Val(); ttl > 3501*time.Millisecond || ttl < 3*time.Second {
		t.Errorf("pttl %s, want just under 3501ms (2501ms plus the expiry grace)", ttl)
	}
	// A stored TAT feeds the script exactly as gcra would read it.
	l := []gcra.Limit{lim(1000*ms, 3)}
	d, err := b.Decide(ctx, []string{"rl:{p}:ahead"}, l, 1, now)
	if err != nil {
		t.Fatal(err)
	}
	wantRes, _ := gcra.Decide(now+2500*ms, now, l[0], 1)
	if d.Results[0] != wantRes {
		t.Errorf("decide on stored tat = %+v, want %+v", d.Results[0], wantRes)
	}
}

func TestBackend_StoreTATs_invalid(t *testing.T) {
	srv := redistest.Start(t)
	c, cnt := newClient(t, srv, 2)
	b := newBackend(t, c, time.Second)
	for _, tat := range []redisbackend.TAT{
		{Key: "", TAT: base, Now: base},
		{Key: "k", TAT: base, Now: 0},
		{Key: "k", TAT: -1, Now: base},
		{Key: "k", TAT: redisbackend.MaxTime + 1, Now: base},
	} {
		ok := redisbackend.TAT{Key: "fine", TAT: base + 5, Now: base}
		if err := b.StoreTATs(t.Context(), []redisbackend.TAT{ok, tat}); err == nil {
			t.Errorf("%+v accepted", tat)
		}
	}
	if n := cnt.n.Load(); n != 0 {
		t.Errorf("%d commands sent for invalid input", n)
	}
}

func TestBackend_LoadTATs_garbage(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv, 2)
	b := newBackend(t, c, time.Second)
	for _, bad := range []string{"1.8e+15", "12.5", "12.0500", "-3", "+3", "12.", ".5", "12.-05"} {
		c.Set(t.Context(), "rl:{g}:bad", bad, 0)
		if _, err := b.LoadTATs(t.Context(), []string{"rl:{g}:ok", "rl:{g}:bad"}); err == nil {
			t.Errorf("%q loaded as a tat", bad)
		}
	}
	_, err := b.Decide(t.Context(), []string{"rl:{g}:bad"}, []gcra.Limit{lim(1, 1)}, 1, base)
	if err == nil {
		t.Error("script accepted a non-integer tat")
	}
	c.Set(t.Context(), "rl:{g}:far", fmt.Sprint(int64(1)<<53), 0)
	_, err = b.Decide(t.Context(), []string{"rl:{g}:far"}, []gcra.Limit{lim(1, 1)}, 1, base)
	if err == nil {
		t.Error("script accepted a tat beyond exact range")
	}
}

func TestBackend_DecidePipelined_matchesDecide(t *testing.T) {
	srv := redistest.Start(t)
	c, cnt := newClient(t, srv, 2)
	b := newBackend(t, c, time.Second)
	ctx := t.Context()
	limits := []gcra.Limit{lim(100_000, 2), lim(50_000, 5)}
	var reqs []redisbackend.DecideRequest
	for i := range 10 {
		keys := []string{fmt.Sprintf("rl:{pipe%d}:a", i%4), fmt.Sprintf("rl:{pipe%d}:b", i%4)}
		reqs = append(reqs, redisbackend.DecideRequest{Keys: keys, Limits: limits, Cost: 1, Now: base})
	}
	bad := redisbackend.DecideRequest{Keys: []string{"{x}a", "{y}b"}, Limits: limits, Cost: 1, Now: base}
	reqs = append(reqs, bad)
	// Warm up: load the script and open a pipeline connection.
	warm := redisbackend.DecideRequest{Keys: []string{"warm"}, Limits: limits[:1], Cost: 1, Now: base}
	if _, errs, err := b.DecidePipelined(ctx, []redisbackend.DecideRequest{warm}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	before := cnt.n.Load()
	ds, errs, err := b.DecidePipelined(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if sent := cnt.n.Load() - before; sent != 10 {
		t.Errorf("%d commands sent, want 10", sent)
	}
	if !errors.Is(errs[10], redisbackend.ErrCrossSlot) {
		t.Errorf("cross-slot item: %v", errs[10])
	}
	// Groups 0 and 1 get three requests, 2 and 3 get two; burst 2 admits
	// two per group at one instant.
	for i := range 10 {
		if errs[i] != nil {
			t.Fatalf("item %d: %v", i, errs[i])
		}
		wantAllowed := i < 8
		if ds[i].Overall.Allowed != wantAllowed {
			t.Errorf("item %d allowed = %v, want %v", i, ds[i].Overall.Allowed, wantAllowed)
		}
	}
	if ds[8].Overall.RetryAfter != 100_000 {
		t.Errorf("retry = %d, want 100000", ds[8].Overall.RetryAfter)
	}
	ds, errs, err = b.DecidePipelined(ctx, nil)
	if len(ds) != 0 || len(errs) != 0 || err != nil {
		t.Errorf("empty batch: %v %v %v", ds, errs, err)
	}
}

// Two writers that both believed they owned a key (a split, a frozen owner
// whose buffered writes land after its successor's): Redis keeps the later
// TAT, whatever order the writes arrive in, and a stale "rested" write does
// not delete a later TAT.
func TestBackend_StoreTATs_neverMovesBackwards(t *testing.T) {
	c, b, now := startBackend(t)
	ctx := t.Context()
	later := redisbackend.TAT{Key: "rl:{q}:k", TAT: now + 5000*ms + 7, Now: now}
	for _, stale := range []redisbackend.TAT{
		{Key: "rl:{q}:k", TAT: now + 1000*ms, Now: now},     // earlier TAT
		{Key: "rl:{q}:k", TAT: now + 5000*ms + 6, Now: now}, // earlier by one nanosecond
		{Key: "rl:{q}:k", TAT: now + 5000*ms, Now: now},     // same microsecond, no nanoseconds
		{Key: "rl:{q}:k", TAT: now - 9000*ms, Now: now},     // rested: would delete
	} {
		if err := b.StoreTATs(ctx, []redisbackend.TAT{later}); err != nil {
			t.Fatal(err)
		}
		if err := b.StoreTATs(ctx, []redisbackend.TAT{stale}); err != nil {
			t.Fatal(err)
		}
		got, err := b.LoadTATs(ctx, []string{later.Key})
		if err != nil {
			t.Fatal(err)
		}
		if got[0] != later.TAT {
			t.Fatalf("after a stale write of %d the key holds %d, want the later %d", stale.TAT-now, got[0]-now, later.TAT-now)
		}
		// Put back, it expires no sooner than the later write set it to.
		if ttl := c.PTTL(ctx, later.Key).Val(); ttl < 5*time.Second+redisbackend.ExpiryGrace-100*time.Millisecond {
			t.Fatalf("after a stale write of %d the later TAT expires in %s", stale.TAT-now, ttl)
		}
	}
	// A later TAT still replaces an earlier one, and the script survives
	// the server losing its script cache.
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	later.TAT += 1000 * ms
	if err := b.StoreTATs(ctx, []redisbackend.TAT{later}); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.LoadTATs(ctx, []string{later.Key}); got[0] != later.TAT {
		t.Fatalf("a later TAT was not stored after SCRIPT FLUSH: %d", got[0]-now)
	}
}

// TestBackend_TATFormat_readsWholeMicroseconds: TATs stored before TATs had
// nanoseconds are whole microseconds; both LoadTATs and the script read them
// as the same instant, and a TAT with nanoseconds is stored as "<us>.<nnn>".
func TestBackend_TATFormat_readsWholeMicroseconds(t *testing.T) {
	c, b, now := startBackend(t)
	ctx := t.Context()
	oldUS := now/1000 + 2_000_000 // 2s ahead, as an older version wrote it
	c.Set(ctx, "rl:{f}:old", strconv.FormatInt(oldUS, 10), 10*time.Second)
	got, err := b.LoadTATs(ctx, []string{"rl:{f}:old"})
	if err != nil || got[0] != oldUS*1000 {
		t.Fatalf("old tat loaded as %v, %v; want %d", got, err, oldUS*1000)
	}
	l := []gcra.Limit{lim(1500, 10_000_000)} // 1.5us, a 15s span: new TATs carry nanoseconds
	d, err := b.Decide(ctx, []string{"rl:{f}:old"}, l, 1, now)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := gcra.Decide(oldUS*1000, now, l[0], 1)
	if d.Results[0] != want {
		t.Fatalf("decide on an old tat = %+v, want %+v", d.Results[0], want)
	}
	raw := c.Get(ctx, "rl:{f}:old").Val()
	if wantRaw := fmt.Sprintf("%d.500", oldUS+1); raw != wantRaw {
		t.Fatalf("stored %q, want %q", raw, wantRaw)
	}
}

// LoadTATs reads keys of many groups with one MGET on a single Redis.
func TestBackend_LoadTATs_oneCommand(t *testing.T) {
	srv := redistest.Start(t)
	c, cnt := newClient(t, srv, 2)
	b := newBackend(t, c, time.Second)
	ctx := t.Context()
	var keys []string
	var want []int64
	for g := range 20 {
		k := fmt.Sprintf("rl:{g%d}:k", g)
		keys = append(keys, k, "untagged-"+strconv.Itoa(g))
		want = append(want, base+int64(g)*us+7, 0) // the untagged keys are missing
		if err := c.Set(ctx, k, strconv.FormatInt(base/1000+int64(g), 10)+".007", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// Warm up, so that connection set-up commands are not counted.
	if _, err := b.LoadTATs(ctx, keys[:1]); err != nil {
		t.Fatal(err)
	}
	before := cnt.n.Load()
	got, err := b.LoadTATs(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("loaded %v, want %v", got, want)
	}
	if n := cnt.n.Load() - before; n != 1 {
		t.Errorf("%d commands for %d keys, want 1 MGET", n, len(keys))
	}
}

// A write of a TAT is one SET on the server, whether the key was absent or
// held an earlier TAT: no GET first. Deletes read first.
func TestBackend_StoreTATs_oneCommandPerWrite(t *testing.T) {
	c, b, now := startBackend(t)
	ctx := t.Context()
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for i, tat := range []int64{now + 1000*ms, now + 2000*ms} { // absent, then earlier
		if err := b.StoreTATs(ctx, []redisbackend.TAT{{Key: "rl:{c}:k", TAT: tat, Now: now}}); err != nil {
			t.Fatal(err)
		}
		stats := c.Info(ctx, "commandstats").Val()
		if want := fmt.Sprintf("cmdstat_set:calls=%d,", i+1); !strings.Contains(stats, want) || strings.Contains(stats, "cmdstat_get:") {
			t.Fatalf("write %d: want %s and no GET; Redis saw:\n%s", i+1, want, stats)
		}
	}
	if got, _ := b.LoadTATs(ctx, []string{"rl:{c}:k"}); got[0] != now+2000*ms {
		t.Fatalf("stored %d, want 2000ms ahead", got[0]-now)
	}
	if err := b.StoreTATs(ctx, []redisbackend.TAT{{Key: "rl:{c}:k", TAT: now - 9000*ms, Now: now}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.LoadTATs(ctx, []string{"rl:{c}:k"}); got[0] != now+2000*ms {
		t.Fatalf("a stale delete changed the key to %d", got[0]-now)
	}
}
