package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/redisbackend/redistest"
)

const failurePolicy = `
version: failure
limits:
  - {name: capacity, match: [api, tenant], rate: 100/s, burst: 100, consistency: strict, on_failure: open}
  - {name: login, match: [login, tenant], rate: 100/s, burst: 100, consistency: strict, on_failure: closed}
  - {name: spend, match: [route, tenant], rate: 1000/s, burst: 1000, consistency: strict,
     on_failure: local, fallback_rate: 1/m, fallback_burst: 3}
  - {name: fast, match: [tenant, user], rate: 1/m, burst: 100}
`

// timedDecide decides with a 1s client deadline and returns the latency.
func timedDecide(t *testing.T, c weirv1.RateLimiterClient, kv ...string) (*weirv1.DecideResponse, time.Duration) {
	t.Helper()
	start := time.Now()
	r := decide(t, c, 1, kv...)
	return r, time.Since(start)
}

// TestNode_redisPausedThenKilled_failurePolicyAndRecovery freezes Redis
// (SIGSTOP), then kills it, and checks each on_failure mode, that no call
// waits past the Redis timeout (plus margin), that the node recovers by
// itself, and that TATs buffered during the outage reach Redis afterwards.
func TestNode_redisPausedThenKilled_failurePolicyAndRecovery(t *testing.T) {
	srv := redistest.Start(t)
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(failurePolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	const redisTimeout = 30 * time.Millisecond
	// --freeze-limit is far above any scheduling gap a loaded machine shows:
	// this test is about Redis outages, and a node that thinks it was frozen
	// answers its fast keys with a "thawing" fallback.
	_, c := startNode(t, "--redis-addr", srv.Addr(), "--policy", path, "--redis-timeout", redisTimeout.String(), "--freeze-limit", "1m")
	// With Redis healthy each strict limit is decided by Redis. A call may
	// still overrun the 30ms timeout on a loaded machine and fall back, so
	// each waits for its first answer from Redis.
	for _, kv := range [][]string{{"tenant", "a", "api", "x"}, {"tenant", "a", "login", "u"}, {"tenant", "a", "route", "/r"}} {
		var r *weirv1.DecideResponse
		waitFor(t, 10*time.Second, func() bool {
			r = decide(t, c, 1, kv...)
			return r.Fallback == nil
		})
		if !r.Allowed {
			t.Fatalf("healthy: %+v", r)
		}
	}
	decide(t, c, 1, "tenant", "a", "user", "u1") // loads the fast key while Redis is up

	for _, outage := range []struct {
		name  string
		start func()
		end   func()
	}{
		{"paused", srv.Pause, srv.Resume},
		{"killed", srv.Stop, srv.Restart},
	} {
		t.Run(outage.name, func(t *testing.T) {
			outage.start()
			ended := false
			defer func() { // a failed check must not leave Redis down for the next step
				if !ended {
					outage.end()
				}
			}()
			var lat []time.Duration
			check := func(kv []string, wantAllowed bool, mode string) *weirv1.DecideResponse {
				r, took := timedDecide(t, c, kv...)
				lat = append(lat, took)
				if r.Allowed != wantAllowed || r.Fallback == nil || r.Fallback.Mode != mode {
					t.Fatalf("%v during outage: %+v, want allowed=%v mode %s", kv, r, wantAllowed, mode)
				}
				return r
			}
			for range 10 {
				check([]string{"tenant", "a", "api", "x"}, true, "open")
				if r := check([]string{"tenant", "a", "login", "u"}, false, "closed"); r.RetryAfter.AsDuration() <= 0 {
					t.Fatalf("closed denial without retry_after: %+v", r)
				}
			}
			var local int
			for range 10 {
				r, took := timedDecide(t, c, "tenant", "a", "route", "/r-"+outage.name)
				lat = append(lat, took)
				if r.Fallback == nil || r.Fallback.Mode != "local" {
					t.Fatalf("%+v", r)
				}
				if r.Allowed {
					local++
				}
			}
			if local != 3 {
				t.Fatalf("local fallback admitted %d of 10, want its burst of 3", local)
			}
			// A fast owner keeps deciding from memory and buffers the TAT.
			if r := decide(t, c, 1, "tenant", "a", "user", "u1"); !r.Allowed || r.Fallback != nil {
				t.Fatalf("fast limit during outage: %+v", r)
			}
			checkOutageLatency(t, lat, redisTimeout)
			outage.end()
			ended = true
			waitFor(t, 15*time.Second, func() bool {
				r := decide(t, c, 1, "tenant", "a", "api", "y")
				return r.Fallback == nil
			})
		})
	}
	// The fast key's TAT went through three admissions; the ones made during
	// the outages were buffered and must reach Redis (killing Redis lost its
	// data, so the write-behind must have re-sent it after the restart).
	waitFor(t, 10*time.Second, func() bool {
		return srv.Client().PTTL(context.Background(), "weir:{a}:fast:a:u1").Val() > 2*time.Minute
	})
}

// checkOutageLatency checks that calls made while Redis does not answer
// wait for the Redis timeout, not for Redis. The median, which a few calls
// descheduled on a loaded machine (the race detector makes 5-10x slower
// calls) do not move, stays within the timeout plus 500ms; the slowest
// call within the timeout plus two seconds. Both rule out calls bounded by
// go-redis's own defaults (3s reads, 5s dials) or by the 5s client
// deadline, which is what waiting on the stopped Redis looks like.
func checkOutageLatency(t *testing.T, lat []time.Duration, redisTimeout time.Duration) {
	t.Helper()
	slices.Sort(lat)
	if median, bound := lat[len(lat)/2], redisTimeout+500*time.Millisecond; median > bound {
		t.Fatalf("median latency %s during the outage exceeds the Redis timeout plus margin (%s)", median, bound)
	}
	if slowest, bound := lat[len(lat)-1], redisTimeout+2*time.Second; slowest > bound {
		t.Fatalf("slowest call %s during the outage exceeds the Redis timeout plus two seconds (%s)", slowest, bound)
	}
}
