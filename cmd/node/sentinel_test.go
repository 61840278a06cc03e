package main

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/redisbackend/redistest"
)

// loadStats are what one load goroutine saw for its key.
type loadStats struct {
	mu sync.Mutex
	c  loadCounts
}

type loadCounts struct {
	calls, allowed, errors int
	fallbacks              int
	firstFB, lastFB        time.Time // the first and last fallback answer
	lastRedis              time.Time // the last answer decided without fallback
	worst                  time.Duration
	lat                    []time.Duration // every call's latency
	firstErr               error
	slow                   []time.Time // when calls over slowCall started
}

// slowCall is a latency worth reporting: four times the Redis timeout.
const slowCall = 200 * time.Millisecond

// runLoad decides kv every interval with a client deadline until ctx ends.
func runLoad(ctx context.Context, c weirv1.RateLimiterClient, every, deadline time.Duration, st *loadStats, kv ...string) {
	d := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		d[kv[i]] = kv[i+1]
	}
	tick := time.NewTicker(every) // paces the load; nothing waits on it
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		cctx, cancel := context.WithTimeout(context.Background(), deadline)
		start := time.Now()
		r, err := c.Decide(cctx, &weirv1.DecideRequest{Descriptors: d})
		took := time.Since(start)
		cancel()
		st.mu.Lock()
		st.c.add(start, took, r, err)
		st.mu.Unlock()
	}
}

func (st *loadCounts) add(start time.Time, took time.Duration, r *weirv1.DecideResponse, err error) {
	{
		st.calls++
		st.worst = max(st.worst, took)
		st.lat = append(st.lat, took)
		if took > slowCall {
			st.slow = append(st.slow, start)
		}
		switch {
		case err != nil:
			st.errors++
			if st.firstErr == nil {
				st.firstErr = err
			}
		case r.Fallback != nil:
			st.fallbacks++
			if st.firstFB.IsZero() {
				st.firstFB = start
			}
			st.lastFB = start
		default:
			st.lastRedis = start
		}
		if err == nil && r.Allowed {
			st.allowed++
		}
	}
}

func (s *loadStats) snapshot() loadCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.c
	c.lat = slices.Clone(c.lat)
	slices.Sort(c.lat)
	return c
}

// median is the middle latency, 0 without calls.
func (c loadCounts) median() time.Duration {
	if len(c.lat) == 0 {
		return 0
	}
	return c.lat[len(c.lat)/2]
}

// scriptCalls is how many EVAL and EVALSHA calls srv has run.
func scriptCalls(t *testing.T, srv *redistest.Server) int {
	t.Helper()
	info, err := srv.Client().Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(info, "\n") {
		if strings.HasPrefix(line, "cmdstat_evalsha:calls=") || strings.HasPrefix(line, "cmdstat_eval:calls=") {
			v, _, _ := strings.Cut(strings.SplitN(line, "=", 2)[1], ",")
			c, _ := strconv.Atoi(v)
			n += c
		}
	}
	return n
}

// TestNode_redisSentinel_followsNewMasterUnderLoad runs a master, a replica
// and three sentinels (with their own password), a node with the default
// --redis-timeout on --redis-sentinel, and a fast and a strict key under
// load. It kills the master and checks that the node follows the promoted
// replica, that every decision is answered within its deadline, and the
// per-key bounds: exact for the fast key (its owner decides in memory), and
// for the strict key the limit plus its fallback allowance over the time
// decisions fell back plus what the replication lag can lose.
func TestNode_redisSentinel_followsNewMasterUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Sentinel and a failover")
	}
	const sentinelPW = "sentinel-s3cret"
	g := redistest.StartSentinel(t, redistest.SentinelOptions{Password: sentinelPW})
	var logs syncBuffer
	// --freeze-limit: a node that thinks itself frozen (a loaded machine
	// can deschedule it past the 1s default) reloads its fast keys from
	// Redis; this test is about failover, not freezes.
	n, c := startNodeLogged(t, &logs, "--redis-sentinel", g.Name()+"@"+strings.Join(g.Addrs(), ","),
		"--redis-sentinel-password-file", writeSecret(t, "spw", sentinelPW), "--freeze-limit", "1m")
	waitFor(t, 10*time.Second, func() bool {
		return decide(t, c, 1, "tenant", "t1", "api", "warm").Fallback == nil
	})
	decide(t, c, 1, "tenant", "t1", "user", "hot") // the owner loads the fast key

	fbBefore := metricValue(t, n.httpAddr(), "weir_fallback_decisions_total")
	ctx, stop := context.WithCancel(context.Background())
	var fast, strict loadStats
	var wg sync.WaitGroup
	wg.Go(func() { runLoad(ctx, c, loadEvery, loadDeadline, &fast, "tenant", "t1", "user", "hot") })
	wg.Go(func() { runLoad(ctx, c, loadEvery, loadDeadline, &strict, "tenant", "t1", "api", "hot") })
	r := failoverRun{began: time.Now()}
	defer func() { stop(); wg.Wait() }()

	waitFor(t, 10*time.Second, func() bool { return strict.snapshot().calls > 200 })
	r.old = g.Master().Addr()
	r.killed = time.Now()
	g.Master().Stop()
	r.promoted = g.WaitFailover(r.old, 60*time.Second)
	r.failedOver = time.Now()
	// The node follows: strict decisions are answered by Redis again.
	waitFor(t, 30*time.Second, func() bool { return strict.snapshot().lastRedis.After(r.failedOver) })
	r.followed = time.Now()
	waitFor(t, 10*time.Second, func() bool {
		return strict.snapshot().calls > fast.snapshot().calls/2 && time.Since(r.followed) > time.Second
	})
	stop()
	wg.Wait()
	r.window = time.Since(r.began).Seconds()
	r.fast, r.strict = fast.snapshot(), strict.snapshot()
	r.fbMetric = metricValue(t, n.httpAddr(), "weir_fallback_decisions_total") - fbBefore

	// The node runs its scripts on the promoted server (a replica counts
	// no script calls: Redis replicates a script's effects).
	if calls := scriptCalls(t, g.Server(r.promoted)); calls == 0 {
		t.Errorf("the promoted master %s ran no weir script", r.promoted)
	}
	r.report(t)
	r.check(t)
	if strings.Contains(logs.String(), sentinelPW) {
		t.Fatal("the sentinel password is in the log")
	}
}

const (
	loadEvery = 2 * time.Millisecond // 500/s offered per key, ten times the limit
	// loadDeadline is the callers' deadline, below go-redis's own
	// defaults (3s reads, 5s dials), which is what waiting on a dead master
	// looks like, and far above the 50ms Redis timeout a decision is
	// bounded by, so that a loaded machine (the race detector, other tests)
	// does not miss it; the median latency is held to the Redis timeout
	// plus 100ms.
	loadDeadline = 2 * time.Second
	connRate     = 50.0 // both limits of connPolicy, per second
	connBurst    = 10
	connFBRate   = 10.0 // the strict limit's fallback_rate, per second
	connFBBurst  = 5
)

// failoverRun is what the Sentinel failover test measured.
type failoverRun struct {
	began, killed, failedOver, followed time.Time
	old, promoted                       string
	window                              float64 // seconds of load
	fast, strict                        loadCounts
	fbMetric                            float64 // weir_fallback_decisions_total over the run
}

// fbWindow is how long, in seconds, strict decisions fell back.
func (r failoverRun) fbWindow() float64 {
	if r.strict.fallbacks == 0 {
		return 0
	}
	return r.strict.lastFB.Sub(r.strict.firstFB).Seconds()
}

func (r failoverRun) report(t *testing.T) {
	t.Helper()
	fs, ss := r.fast, r.strict
	t.Logf("master %s killed; sentinels promoted %s after %s; node decided strict keys in Redis again %s after the kill",
		r.old, r.promoted, r.failedOver.Sub(r.killed).Round(time.Millisecond), r.followed.Sub(r.killed).Round(time.Millisecond))
	t.Logf("fast key: %d calls, %d allowed, %d fallbacks, %d errors, median %s, worst %s (deadline %s)", fs.calls, fs.allowed, fs.fallbacks, fs.errors, fs.median(), fs.worst, loadDeadline)
	t.Logf("strict key: %d calls, %d allowed, %d fallbacks over %.2fs, %d errors, median %s, worst %s", ss.calls, ss.allowed, ss.fallbacks, r.fbWindow(), ss.errors, ss.median(), ss.worst)
	for _, at := range ss.slow {
		t.Logf("strict call over %s at kill%+.3fs", slowCall, at.Sub(r.killed).Seconds())
	}
	for _, at := range fs.slow {
		t.Logf("fast call over %s at kill%+.3fs", slowCall, at.Sub(r.killed).Seconds())
	}
	t.Logf("weir_fallback_decisions_total: +%.0f; window %.2fs", r.fbMetric, r.window)
	t.Logf("strict excess over burst+rate*window: %.1f (failover term allowed %.1f)",
		float64(ss.allowed)-(connBurst+connRate*r.window), connFBBurst+connFBRate*r.fbWindow()+connBurst+connRate)
}

// check asserts the deadlines and the per-key bounds.
func (r failoverRun) check(t *testing.T) {
	t.Helper()
	fs, ss := r.fast, r.strict
	for name, s := range map[string]loadCounts{"fast": fs, "strict": ss} {
		if s.errors > 0 {
			t.Errorf("%s key: %d of %d decisions not answered within the %s deadline (first: %v)", name, s.errors, s.calls, loadDeadline, s.firstErr)
		}
		if bound := 50*time.Millisecond + 100*time.Millisecond; s.median() > bound {
			t.Errorf("%s key: median latency %s over the Redis timeout plus 100ms (%s)", name, s.median(), bound)
		}
	}
	// Fast: the owner decides in memory throughout; exact GCRA bound
	// (plus the warm-up admission).
	if limit := connBurst + connRate*r.window + 1; float64(fs.allowed) > limit || fs.fallbacks > 0 {
		t.Errorf("fast key: %d allowed (bound %.0f), %d fallbacks (want 0)", fs.allowed, limit, fs.fallbacks)
	}
	// Strict: Redis's own GCRA over the window, the local fallback
	// allowance while it fell back, and the writes the promoted replica may
	// not have had: at most a burst and a second of the limit (replication
	// lag on loopback is far below a second).
	limit := connBurst + connRate*r.window + connFBBurst + connFBRate*r.fbWindow() + connBurst + connRate*1
	if float64(ss.allowed) > limit {
		t.Errorf("strict key: %d allowed, bound %.0f", ss.allowed, limit)
	}
	if ss.fallbacks == 0 || r.fbMetric < float64(ss.fallbacks) {
		t.Errorf("strict key: %d fallbacks seen, metric +%.0f: the failover was not noticed", ss.fallbacks, r.fbMetric)
	}
}
