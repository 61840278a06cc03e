package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/policy"
	"github.com/weirhq/weir/redisbackend/redistest"
)

// startNode runs a node in-process on loopback ports chosen by the kernel.
func startNode(t *testing.T, extra ...string) (*node, weirv1.RateLimiterClient) {
	t.Helper()
	args := append([]string{"--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--peer-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}, extra...)
	cfg, err := parseConfig(args, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	n, err := start(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.shutdown(context.Background(), 5*time.Second) })
	conn, err := grpc.NewClient(n.grpcAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return n, weirv1.NewRateLimiterClient(conn)
}

func decide(t *testing.T, c weirv1.RateLimiterClient, cost int64, kv ...string) *weirv1.DecideResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		d[kv[i]] = kv[i+1]
	}
	resp, err := c.Decide(ctx, &weirv1.DecideRequest{Descriptors: d, Cost: new(cost)})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// checkSeedTrace runs the seed's trace against the built-in per-user limit
// (5/s, burst 3) for a user of tenant demo: four requests at (nearly) one
// instant, three pass with 2, 1, 0 left, the fourth waits ~200ms. The node
// stamps each request with its own clock, so those figures hold only while
// the four stamps lie within 200ms; a run the machine stretched past that
// proves nothing and is repeated on a fresh user.
func checkSeedTrace(t *testing.T, c weirv1.RateLimiterClient) {
	t.Helper()
	const tries = 20
	for i := range tries {
		if checkTrace(t, c, 200*time.Millisecond, "tenant", "demo", "user", fmt.Sprintf("seed%d", i)) {
			return
		}
	}
	t.Fatalf("no four calls ran within 200ms in %d tries", tries)
}

// checkTrace sends four requests of cost 1, back to back, to a fresh key of
// a limit of burst 3 whose interval (1/rate) is given: three pass with 2, 1,
// 0 left and the fourth is denied until one interval after the first. The
// client's time around the four calls bounds the spread of the node's
// stamps. checkTrace reports false, having asserted nothing, when that span
// reached the interval, as a unit may then have come back between calls.
func checkTrace(t *testing.T, c weirv1.RateLimiterClient, interval time.Duration, kv ...string) bool {
	t.Helper()
	start := time.Now()
	var rs [4]*weirv1.DecideResponse
	for i := range rs {
		rs[i] = decide(t, c, 1, kv...)
	}
	span := time.Since(start)
	if span >= interval {
		t.Logf("four calls took %s, not within one interval (%s): the trace proves nothing", span, interval)
		return false
	}
	for i, want := range []int64{2, 1, 0} {
		if r := rs[i]; !r.Allowed || r.Remaining != want {
			t.Fatalf("request %d: allowed=%v remaining=%d, want true %d", i, r.Allowed, r.Remaining, want)
		}
	}
	// Exactly one interval minus the time between the first and fourth stamps.
	if r, retry := rs[3], rs[3].RetryAfter.AsDuration(); r.Allowed || retry < interval-span || retry > interval {
		t.Fatalf("fourth request: allowed=%v retry=%s, want denied with retry in [%s, %s]", r.Allowed, retry, interval-span, interval)
	}
	return true
}

// slowPolicy writes a policy whose per-user limit (5/h, burst 3, grouped by
// tenant as in the built-in one) gives no unit back while a test runs, so
// tests whose node decides through Redis (slower, and on the Redis clock)
// can check the trace without a race against the refill.
func slowPolicy(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	body := "version: slow\nlimits:\n  - {name: per-user, match: [tenant, user], group: tenant, rate: 5/h, burst: 3}\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkSlowTrace checks the trace against slowPolicy's limit.
func checkSlowTrace(t *testing.T, c weirv1.RateLimiterClient, kv ...string) {
	t.Helper()
	if !checkTrace(t, c, time.Hour/5, kv...) {
		t.Fatal("four calls took longer than 12 minutes")
	}
}

func TestNode_embedded_seedTraceOverGRPC(t *testing.T) {
	_, c := startNode(t)
	checkSeedTrace(t, c)
}

func TestNode_redis_seedTraceOverGRPC(t *testing.T) {
	srv := redistest.Start(t)
	policyPath := slowPolicy(t)
	// The trace is judged on the owner's memory: a node that thought itself
	// frozen by a loaded machine (--freeze-limit) would reload from Redis
	// and could answer from a fallback, and the 50ms Redis default was
	// overrun there too.
	_, c := startNode(t, "--redis-addr", srv.Addr(), "--policy", policyPath, "--freeze-limit", "1m", "--redis-timeout", "5s")
	checkSlowTrace(t, c, "tenant", "demo", "user", "u7")
	// The owner persists TATs write-behind, each admission's in its own
	// flush or later; once Redis holds the TAT of all three (36 minutes
	// ahead, so its TTL passes 30 minutes), a second node on the same Redis
	// (a cluster of its own) loads it before deciding and grants no new
	// burst. Waiting only for the key to exist let the second node load the
	// TAT of the first admission.
	waitFor(t, 5*time.Second, func() bool {
		return srv.Client().PTTL(context.Background(), "weir:{demo}:per-user:demo:u7").Val() > 30*time.Minute
	})
	_, c2 := startNode(t, "--redis-addr", srv.Addr(), "--policy", policyPath)
	if r := decide(t, c2, 1, "tenant", "demo", "user", "u7"); r.Allowed {
		t.Fatal("a fresh node on the same Redis granted a new burst")
	}
}

func TestNode_redisCluster_decides(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Redis Cluster")
	}
	cl := redistest.StartCluster(t, 3)
	// A generous Redis timeout: the first load dials the key's master, which
	// overran the 50ms default on a loaded machine.
	_, c := startNode(t, "--redis-cluster", strings.Join(cl.Addrs(), ","), "--redis-timeout", "1s", "--policy", slowPolicy(t))
	checkSlowTrace(t, c, "tenant", "demo", "user", "u7")
}

func TestNode_badInputIsInvalidArgument(t *testing.T) {
	_, c := startNode(t)
	ctx := context.Background()
	for name, req := range map[string]*weirv1.DecideRequest{
		"negative cost":      {Descriptors: map[string]string{"tenant": "a"}, Cost: new(int64(-1))},
		"huge cost":          {Descriptors: map[string]string{"tenant": "a"}, Cost: new(int64(2_000_000_000))},
		"oversized value":    {Descriptors: map[string]string{"tenant": strings.Repeat("x", 300)}},
		"unknown descriptor": {Descriptors: map[string]string{"tenant": "a", "nope": "b"}},
	} {
		_, err := c.Decide(ctx, req)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: got %v, want InvalidArgument", name, err)
		}
	}
	// Nothing above consumed quota for tenant a.
	if r := decide(t, c, 1, "tenant", "a", "user", "u"); !r.Allowed || r.Remaining != 2 {
		t.Fatalf("state changed by bad input: %+v", r)
	}
}

func TestNode_policyHotReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.yaml")
	write := func(body string) {
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write("version: v1\nlimits:\n  - {name: l, match: [k], rate: 1/s, burst: 1}\n")
	n, c := startNode(t, "--policy", path)
	if v := decide(t, c, 1, "k", "x").PolicyVersion; v != "v1" {
		t.Fatalf("version %q", v)
	}
	updates := n.watcher.Subscribe()

	write("version: v2\nlimits:\n  - {name: l, match: [k], rate: 1/s, burst: 5}\n")
	n.reloadPolicy() // as on SIGHUP; the file watcher may also see it first
	waitVersion(t, updates, c, "v2")

	write("version: v3\nlimits:\n  - {name: l, match: [k], rate: 1/x, burst: 5}\n")
	n.reloadPolicy()
	if v := decide(t, c, 1, "k", "y").PolicyVersion; v != "v2" {
		t.Fatalf("a bad policy replaced the good one: version %q", v)
	}
}

func waitVersion(t *testing.T, updates <-chan *policy.Policy, c weirv1.RateLimiterClient, want string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for decide(t, c, 1, "k", "probe-"+want).PolicyVersion != want {
		select {
		case <-updates:
		case <-deadline:
			t.Fatalf("policy %s never became active", want)
		}
	}
}

func TestNode_httpDenialHas429AndHeaders(t *testing.T) {
	n, _ := startNode(t)
	body := `{"descriptors":{"tenant":"demo","user":"u9"},"cost":3}`
	post := func() *http.Response {
		resp, err := http.Post("http://"+n.httpAddr()+"/v1/decide", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if r := post(); r.StatusCode != http.StatusOK {
		t.Fatalf("first: %d", r.StatusCode)
	}
	r := post()
	if r.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second: %d, want 429", r.StatusCode)
	}
	if got := r.Header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After %q, want 1 (600ms rounded up)", got)
	}
	if got := r.Header.Get("RateLimit-Policy"); !strings.Contains(got, `"per-user";q=3;w=1`) {
		t.Errorf("RateLimit-Policy %q", got)
	}
	if got := r.Header.Get("RateLimit"); !strings.Contains(got, `"per-user";r=0;t=1`) {
		t.Errorf("RateLimit %q", got)
	}
	var out map[string]any
	// Every field is there, zero values included (issue 21).
	if err := json.NewDecoder(r.Body).Decode(&out); err != nil || out["allowed"] != false || out["remaining"] != "0" {
		t.Fatalf("body %v %v, want \"allowed\": false and \"remaining\": \"0\"", out, err)
	}
}

func TestNode_healthAndShutdown(t *testing.T) {
	n, _ := startNode(t)
	conn, err := grpc.NewClient(n.grpcAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	h, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health %v %v", h, err)
	}
	n.shutdown(context.Background(), 5*time.Second)
	n.shutdown(context.Background(), 5*time.Second) // idempotent
	if _, err := http.Get("http://" + n.httpAddr() + "/healthz"); err == nil {
		t.Fatal("http still serving after shutdown")
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", within)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, not waiting for an outcome
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }
