package redisbackend_test

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/redisbackend"
	"github.com/weirhq/weir/redisbackend/redistest"
)

// TestBackend_Decide_handTrace replays the seed's trace: 5/s burst 3.
func TestBackend_Decide_handTrace(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv, 2)
	b := newBackend(t, c, time.Second)
	l := []gcra.Limit{lim(200_000*us, 3)}
	keys := []string{"rl:{trace}:k"}
	steps := []struct {
		at        int64
		allowed   bool
		remaining int64
		retry     int64
	}{
		{0, true, 2, 0},
		{0, true, 1, 0},
		{0, true, 0, 0},
		{0, false, 0, 200_000 * us},
		{250_000 * us, true, 0, 0},
		{250_000 * us, false, 0, 150_000 * us},
	}
	for i, s := range steps {
		d, err := b.Decide(t.Context(), keys, l, 1, base+s.at)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		o := d.Overall
		if o.Allowed != s.allowed || o.Remaining != s.remaining || o.RetryAfter != s.retry || d.Now != base+s.at {
			t.Errorf("step %d at %dns: got allowed=%v remaining=%d retry=%d now=%d, want %v %d %d",
				i, s.at, o.Allowed, o.Remaining, o.RetryAfter, d.Now-base, s.allowed, s.remaining, s.retry)
		}
	}
}

// TestBackend_Decide_matchesGCRA drives the script and gcra.DecideComposite
// through the same random sequence and compares every result.
func TestBackend_Decide_matchesGCRA(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv, 2)
	b := newBackend(t, c, time.Second)
	rng := rand.New(rand.NewPCG(1, 2))
	steps := 20000
	if testing.Short() {
		steps = 3000
	}
	now, zeros, costly, allowed := base, 0, 0, 0
	for run := 0; steps > 0; run++ {
		n := 1 + rng.IntN(3)
		keys := make([]string, n)
		limits := make([]gcra.Limit, n)
		for i := range n {
			keys[i] = "rl:{rand" + strconv.Itoa(run) + "}:" + strconv.Itoa(i)
			// Up to 50ms, mostly not whole microseconds: TATs carry nanoseconds.
			limits[i] = lim(1+rng.Int64N(50_000_000), 1+rng.Int64N(12))
		}
		tats := make([]int64, n)
		out := make([]gcra.Result, n)
		last := time.Now()
		for range 50 {
			steps--
			now += nextStep(rng, time.Since(last), &zeros)
			cost := 1 + rng.Int64N(4)
			want, err := gcra.DecideComposite(tats, now, limits, cost, out)
			if err != nil {
				t.Fatal(err)
			}
			if want.TooCostly {
				costly++
			}
			if want.Allowed {
				allowed++
			}
			last = time.Now()
			got, err := b.Decide(t.Context(), keys, limits, cost, now)
			if err != nil {
				t.Fatalf("decide: %v", err)
			}
			want.TAT = 0
			if !sameResult(got.Overall, want, now) {
				t.Fatalf("overall at %d cost %d limits %v:\n got %+v\nwant %+v", now-base, cost, limits, got.Overall, want)
			}
			for i := range n {
				if !sameResult(got.Results[i], out[i], now) {
					t.Fatalf("limit %d at %d:\n got %+v\nwant %+v", i, now-base, got.Results[i], out[i])
				}
				tats[i] = out[i].TAT
			}
		}
	}
	t.Logf("%d same-instant steps, %d allowed, %d too costly", zeros, allowed, costly)
	if zeros == 0 || costly == 0 || allowed == 0 {
		t.Errorf("sequence too tame: %d same-instant steps, %d allowed, %d too costly", zeros, allowed, costly)
	}
}

// nextStep picks how far explicit time moves: sometimes not at all (several
// requests in one instant), else 1ns..60ms. Redis expires keys on its real
// clock, so simulated time must never fall behind real time since the last
// write, or a key the model still holds could vanish: a same-instant step is
// only taken when little real time has passed, and every step covers at
// least the real time spent.
func nextStep(rng *rand.Rand, real time.Duration, zeros *int) int64 {
	realNS := real.Nanoseconds()
	if rng.IntN(4) == 0 && realNS < 500*us {
		*zeros++
		return 0
	}
	return max(1+rng.Int64N(60_000*us), realNS+1000*us)
}

func TestBackend_Decide_boundaries(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv, 2)
	b := newBackend(t, c, time.Second)
	keys := []string{"rl:{edge}:k"}
	l := []gcra.Limit{lim(1000, 2)}
	for range 2 {
		mustDecide(t, b, keys, l, 1, base, true)
	}
	// TAT is base+2000; the next unit is allowed at base+1000 exactly.
	d := mustDecide(t, b, keys, l, 1, base+999, false)
	if d.Overall.RetryAfter != 1 {
		t.Errorf("retry = %d, want 1", d.Overall.RetryAfter)
	}
	mustDecide(t, b, keys, l, 1, base+1000, true)
	// A clock going backwards only makes decisions stricter.
	d = mustDecide(t, b, keys, l, 1, base, false)
	if d.Overall.RetryAfter != 2000 {
		t.Errorf("retry after going back = %d, want 2000", d.Overall.RetryAfter)
	}
	// Cost above the burst can never pass.
	d = mustDecide(t, b, []string{"rl:{edge}:other"}, l, 3, base, false)
	if !d.Overall.TooCostly || d.Overall.RetryAfter != 0 || d.Overall.Remaining != 2 {
		t.Errorf("too costly: %+v", d.Overall)
	}
}

func mustDecide(t *testing.T, b *redisbackend.Backend, keys []string, l []gcra.Limit, cost, now int64, allowed bool) redisbackend.Decision {
	t.Helper()
	d, err := b.Decide(t.Context(), keys, l, cost, now)
	if err != nil {
		t.Fatalf("decide: %v", err)
	}
	if d.Overall.Allowed != allowed {
		t.Fatalf("at %d: allowed = %v, want %v (%+v)", now-base, d.Overall.Allowed, allowed, d.Overall)
	}
	return d
}

// TestBackend_Decide_compositeAllOrNothing checks that a denial by one limit
// writes nothing for the others.
func TestBackend_Decide_compositeAllOrNothing(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv, 2)
	b := newBackend(t, c, time.Second)
	keys := []string{"rl:{t1}:all", "rl:{t1}:user"}
	limits := []gcra.Limit{lim(1000, 100), lim(1000, 1)}
	mustDecide(t, b, keys, limits, 1, base, true)
	before, err := b.LoadTATs(t.Context(), keys)
	if err != nil {
		t.Fatal(err)
	}
	d := mustDecide(t, b, keys, limits, 1, base, false)
	if !d.Results[0].Allowed || d.Results[1].Allowed || d.Overall.RetryAfter != 1000 {
		t.Errorf("results %+v", d.Results)
	}
	after, err := b.LoadTATs(t.Context(), keys)
	if err != nil {
		t.Fatal(err)
	}
	if before[0] != after[0] || before[1] != after[1] {
		t.Errorf("denied composite changed state: %v -> %v", before, after)
	}
}

// TestBackend_Decide_serverTimeAndStorage checks TIME use, the stored text
// (decimal, never exponent form) and the PX expiry. The keys live seconds
// (a key that expired in milliseconds could be gone before it is read on a
// loaded machine), and the expiry is checked against the time that really
// passed since the decision.
func TestBackend_Decide_serverTimeAndStorage(t *testing.T) {
	c, b, before := startBackend(t)
	ctx := t.Context()
	if d := time.Since(time.Unix(0, before)).Abs(); d > 5*time.Second {
		t.Fatalf("redis TIME is %s away from the local clock", d)
	}
	keys := []string{"rl:{st}:a", "rl:{st}:b"}
	start := time.Now()
	d, err := b.Decide(ctx, keys, []gcra.Limit{lim(3_000_000_000, 10), lim(3_000_000_007, 1)}, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	after, err := b.Time(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.Now < before || d.Now > after || d.Now%1000 != 0 {
		t.Errorf("decision time %d not between TIME before (%d) and after (%d) in whole microseconds", d.Now, before, after)
	}
	for i, k := range keys {
		raw, err := c.Get(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		// Whole microseconds, then nanoseconds past them when not zero:
		// TIME is whole microseconds, so the 3s+7ns limit leaves ".007".
		tat := d.Results[i].TAT
		want := strconv.FormatInt(tat/1000, 10)
		if i == 1 {
			want += ".007"
		}
		if raw != want || tat%1000 != [2]int64{0, 7}[i] {
			t.Errorf("%s stored %q (tat %d), want %q", k, raw, tat, want)
		}
		px := (tat-d.Now+999_999)/1_000_000 + 1
		ttl := c.PTTL(ctx, k).Val().Milliseconds()
		// The key was set after start: at most the time since has run off.
		if passed := time.Since(start).Milliseconds() + 1; ttl > px || ttl < px-passed {
			t.Errorf("%s pttl %dms, want between %dms and %dms", k, ttl, px-passed, px)
		}
	}
}

func TestBackend_Decide_invalidSendsNothing(t *testing.T) {
	srv := redistest.Start(t)
	c, cnt := newClient(t, srv, 2)
	b := newBackend(t, c, time.Second)
	ok := []gcra.Limit{lim(1000, 5)}
	two := []gcra.Limit{lim(1000, 5), lim(1000, 5)}
	cases := []struct {
		name   string
		keys   []string
		limits []gcra.Limit
		cost   int64
		now    int64
		is     error
	}{
		{"zero cost", []string{"k"}, ok, 0, base, gcra.ErrInvalidCost},
		{"negative cost", []string{"k"}, ok, -1, base, gcra.ErrInvalidCost},
		{"no keys", nil, nil, 1, base, nil},
		{"length mismatch", []string{"{a}1", "{a}2"}, ok, 1, base, nil},
		{"bad limit", []string{"k"}, []gcra.Limit{lim(0, 5)}, 1, base, gcra.ErrInvalidLimit},
		{"span too long", []string{"k"}, []gcra.Limit{lim(redisbackend.MaxSpan, 2)}, 1, base, gcra.ErrInvalidLimit},
		{"negative now", []string{"k"}, ok, 1, -5, nil},
		{"now too late", []string{"k"}, ok, 1, redisbackend.MaxTime + 1, nil},
		{"cross group", []string{"{a}1", "{b}2"}, two, 1, base, redisbackend.ErrCrossSlot},
		{"no tag", []string{"a1", "a2"}, two, 1, base, redisbackend.ErrCrossSlot},
		{"tag on one", []string{"{a}1", "a2"}, two, 1, base, redisbackend.ErrCrossSlot},
		{"duplicate", []string{"{a}1", "{a}1"}, two, 1, base, nil},
	}
	for _, tc := range cases {
		_, err := b.Decide(t.Context(), tc.keys, tc.limits, tc.cost, tc.now)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("%s: error %v is not %v", tc.name, err, tc.is)
		}
	}
	if n := cnt.n.Load(); n != 0 {
		t.Errorf("%d commands sent for invalid input", n)
	}
}

func TestConfig_Validate(t *testing.T) {
	if err := redisbackend.DefaultConfig().Validate(); err != nil {
		t.Errorf("default: %v", err)
	}
	if err := (redisbackend.Config{}).Validate(); err == nil {
		t.Error("zero timeout accepted")
	}
}

// TestBackend_Decide_tooCostlyCompositeNamesNoWait: one limit busy, another
// whose burst is below the cost. The request can never pass, so the
// aggregate says TooCostly with RetryAfter 0, as gcra.DecideComposite does;
// the busy limit's own result still names its wait.
func TestBackend_Decide_tooCostlyCompositeNamesNoWait(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := newClient(t, srv, 2)
	b := newBackend(t, c, time.Second)
	keys := []string{"rl:{tc}:busy", "rl:{tc}:small"}
	limits := []gcra.Limit{lim(1000, 10), lim(1000, 2)}
	mustDecide(t, b, keys[:1], limits[:1], 10, base, true)
	d := mustDecide(t, b, keys, limits, 3, base, false)
	if !d.Overall.TooCostly || d.Overall.RetryAfter != 0 {
		t.Errorf("aggregate %+v, want TooCostly with RetryAfter 0", d.Overall)
	}
	if d.Results[0].RetryAfter != 3000 || !d.Results[1].TooCostly {
		t.Errorf("per limit %+v, want the busy limit's wait of 3000ns and the small one TooCostly", d.Results)
	}
}
