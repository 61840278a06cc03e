package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/redisbackend"
	"github.com/weirhq/weir/redisbackend/redistest"
	"github.com/weirhq/weir/tlsfiles/tlstest"
)

// connPolicy has a fast and a strict limit, so that a node exercises every
// Redis path: owner loads (MGET), write-behind (the store script), strict
// decisions (the decide script) and the clock (TIME).
const connPolicy = `
version: conn
limits:
  - {name: fast, match: [tenant, user], rate: 50/s, burst: 10}
  - {name: strict, match: [tenant, api], group: api, rate: 50/s, burst: 10, consistency: strict,
     on_failure: local, fallback_rate: 10/s, fallback_burst: 5}
`

// startNodeLogged is startNode with the node's log written to logw and the
// policy connPolicy.
func startNodeLogged(t *testing.T, logw io.Writer, extra ...string) (*node, weirv1.RateLimiterClient) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(connPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--peer-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--policy", path}, extra...)
	cfg, err := parseConfig(args, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	n, err := start(context.Background(), cfg, slog.New(slog.NewTextHandler(logw, nil)))
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

// writeSecret writes a password file and returns its path.
func writeSecret(t *testing.T, name, secret string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// exerciseRedis drives every Redis path of a node and waits until each
// answered from Redis: a strict decision without fallback, a fast key
// loaded and its TAT written behind.
func exerciseRedis(t *testing.T, c weirv1.RateLimiterClient, admin *redis.Client, user string) {
	t.Helper()
	waitFor(t, 10*time.Second, func() bool {
		return decide(t, c, 1, "tenant", "t1", "api", user).Fallback == nil
	})
	// Spend the fast key's burst, so that its TAT lies far enough ahead
	// for the write-behind to persist it.
	for i := 0; ; i++ {
		r := decide(t, c, 1, "tenant", "t1", "user", user)
		if r.Fallback != nil {
			t.Fatalf("fast decision: %+v", r)
		}
		if !r.Allowed {
			break
		}
		if i > 100 {
			t.Fatal("the fast key never ran out of burst")
		}
	}
	key := "weir:{t1}:fast:t1:" + user
	waitFor(t, 10*time.Second, func() bool {
		return admin.Exists(context.Background(), key).Val() == 1
	})
}

// aclDenials returns the server's ACL LOG entries (denied commands, keys
// or logins), read with the admin client.
func aclDenials(t *testing.T, admin *redis.Client) []string {
	t.Helper()
	entries, err := admin.Do(context.Background(), "ACL", "LOG").Slice()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, fmt.Sprint(e))
	}
	return out
}

// docACL reads the ACL line docs/operations.md tells operators to use
// ("ACL SETUSER weir on >PASSWORD ..."), so that the tests check exactly
// what the documentation says, and returns it as a user directive with
// password.
func docACL(t *testing.T, password string) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "ACL SETUSER weir "); ok {
			if !strings.Contains(rest, ">PASSWORD") {
				t.Fatalf("the documented ACL line has no >PASSWORD: %s", line)
			}
			return "weir " + strings.Replace(rest, ">PASSWORD", ">"+password, 1)
		}
	}
	t.Fatal("docs/operations.md has no line starting ACL SETUSER weir")
	return ""
}

// aclServerUsers are the users every ACL test server has besides weir's: a
// default user that can only PING (the readiness check) and an admin.
var aclServerUsers = []string{"default on nopass -@all +ping", "admin on >adminpw ~* &* +@all"}

func redisAdmin(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, Username: "admin", Password: "adminpw"})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestNode_redisMutualTLSACL_passwordFromFile runs a node against a Redis
// that takes only mutual TLS and the documented ACL user, with the
// password from a file: every Redis path works, Redis logged no denied
// command, and the password is in no log line and no admin output.
func TestNode_redisMutualTLSACL_passwordFromFile(t *testing.T) {
	const secret = "s3cret-Pa55"
	ca := tlstest.NewCA(t, "redis-ca")
	dir := t.TempDir()
	srvFiles := ca.WriteFiles(t, dir, "redis", "redis", "127.0.0.1")
	cliFiles := ca.WriteClientFiles(t, dir, "weir", "weir")
	srv := redistest.StartTLS(t, redistest.TLSFiles{Cert: srvFiles.Cert, Key: srvFiles.Key, CA: srvFiles.CA}, true,
		redistest.WithACL(append(aclServerUsers, docACL(t, secret))...))
	admin := redisAdmin(t, srv.Addr())
	var logs syncBuffer
	n, c := startNodeLogged(t, &logs, "--redis-addr", srv.TLSAddr, "--redis-tls-ca", srvFiles.CA,
		"--redis-tls-cert", cliFiles.Cert, "--redis-tls-key", cliFiles.Key,
		"--redis-username", "weir", "--redis-password-file", writeSecret(t, "pw", secret))
	exerciseRedis(t, c, admin, "u1")
	if d := aclDenials(t, admin); len(d) > 0 {
		t.Fatalf("Redis denied weir's user: %v", d)
	}
	if got := admin.ClientList(context.Background()).Val(); !strings.Contains(got, "user=weir") {
		t.Fatalf("no connection as user weir: %s", got)
	}
	checkNoSecret(t, n, &logs, secret)
	if !strings.Contains(logs.String(), `redis="rediss://weir:xxxxx@`+srv.TLSAddr) {
		t.Fatalf("the startup log does not describe the Redis target:\n%s", logs.String())
	}
}

// checkNoSecret fails if secret is in the node's log, /admin/status (what
// weir status prints) or /metrics.
func checkNoSecret(t *testing.T, n *node, logs *syncBuffer, secret string) {
	t.Helper()
	if strings.Contains(logs.String(), secret) {
		t.Fatalf("the password is in the log:\n%s", logs.String())
	}
	for _, url := range []string{"http://" + n.adminAddr() + "/admin/status", "http://" + n.httpAddr() + "/metrics"} {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %v", url, resp.StatusCode, err)
		}
		if strings.Contains(string(b), secret) {
			t.Fatalf("the password is in %s:\n%s", url, b)
		}
	}
}

// TestNode_redisURL_passwordNeverShown gives the password in --redis-url,
// the worst case, pointing at a port nothing listens on: the connection
// errors the node logs, its status and metrics still never show it.
func TestNode_redisURL_passwordNeverShown(t *testing.T) {
	const secret = "hunter2-in-url"
	srv := redistest.Start(t)
	dead := srv.Addr()
	srv.Stop() // a port that refuses connections
	var logs syncBuffer
	n, c := startNodeLogged(t, &logs, "--redis-url", "redis://weir:"+secret+"@"+dead+"/0")
	if r := decide(t, c, 1, "tenant", "t1", "api", "x"); r.Fallback == nil {
		t.Fatalf("decided without Redis: %+v", r)
	}
	if !strings.Contains(logs.String(), "redis not reachable at start") {
		t.Fatalf("no connection error logged:\n%s", logs.String())
	}
	checkNoSecret(t, n, &logs, secret)
}

// TestNode_redisACL_documentedLineIsMinimal removes each command from the
// documented ACL line in turn: each removal must make Redis deny something
// weir does, so the line holds no command weir does not need.
func TestNode_redisACL_documentedLineIsMinimal(t *testing.T) {
	if testing.Short() {
		t.Skip("one Redis and node per command")
	}
	full := strings.Fields(docACL(t, "pw"))
	for i, f := range full {
		if !strings.HasPrefix(f, "+") {
			continue
		}
		t.Run(f, func(t *testing.T) {
			user := strings.Join(slices.Delete(slices.Clone(full), i, i+1), " ")
			srv := redistest.Start(t, redistest.WithACL(append(aclServerUsers, user)...))
			admin := redisAdmin(t, srv.Addr())
			n, c := startNodeLogged(t, io.Discard, "--redis-addr", srv.Addr(), "--redis-username", "weir", "--redis-password-file", writeSecret(t, "pw", "pw"), "--freeze-limit", "1m")
			// Each path once, without waiting for success: the one that
			// needs the missing command never gets it.
			for i := range 12 {
				decide(t, c, 1, "tenant", "t1", "api", "x")
				decide(t, c, 1, "tenant", "t1", "user", fmt.Sprint("u", i))
			}
			if len(aclDenials(t, admin)) > 0 {
				return
			}
			// DEL runs only when the write-behind stores a TAT that rested
			// over a second ago (redisbackend.ExpiryGrace), as after an
			// outage: store one such TAT as the write-behind would.
			b, err := redisbackend.New(n.redisConn.Redis(), redisbackend.Config{Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now().UnixNano()
			_ = b.StoreTATs(context.Background(), []redisbackend.TAT{{Key: "weir:{t1}:fast:t1:u0", TAT: now - 5*time.Second.Nanoseconds(), Now: now}})
			if len(aclDenials(t, admin)) == 0 {
				t.Fatalf("weir ran without %s and Redis denied nothing: the documented line need not have it", f)
			}
		})
	}
}

// metricValue returns the sum of a metric's series on a node's /metrics.
func metricValue(t *testing.T, httpAddr, name string) float64 {
	t.Helper()
	v := scrapeSum(http.DefaultClient, "http://"+httpAddr+"/metrics", name)
	if v < 0 {
		t.Fatalf("%s/metrics does not answer", httpAddr)
	}
	return v
}

// TestNode_redisClusterACL_documentedLine runs a node on a Redis Cluster
// whose nodes all have the documented user with the Cluster additions.
func TestNode_redisClusterACL_documentedLine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Redis Cluster")
	}
	cl := redistest.StartCluster(t, 3)
	user := strings.Fields(docACL(t, "pw") + " " + docClusterACL(t))
	for i := range 3 {
		args := append([]any{"ACL", "SETUSER"}, anys(user)...)
		if err := cl.Node(i).Client().Do(context.Background(), args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	seeds := make([]string, 0, 3)
	for _, a := range cl.Addrs() {
		seeds = append(seeds, "redis://"+a)
	}
	_, c := startNodeLogged(t, io.Discard, "--redis-cluster", strings.Join(seeds, ","), "--redis-username", "weir",
		"--redis-password-file", writeSecret(t, "pw", "pw"), "--redis-timeout", "1s")
	waitFor(t, 10*time.Second, func() bool {
		return decide(t, c, 1, "tenant", "t1", "api", "x").Fallback == nil
	})
	for i := range 20 {
		if r := decide(t, c, 1, "tenant", "t1", "user", fmt.Sprint("u", i)); r.Fallback != nil {
			t.Fatalf("fast decision: %+v", r)
		}
	}
	for i := range 3 {
		if d := aclDenials(t, cl.Node(i).Client()); len(d) > 0 {
			t.Fatalf("node %d denied weir's user: %v", i, d)
		}
	}
}

// docClusterACL reads the commands docs/operations.md says to add on Redis
// Cluster (the line starting "Cluster adds:" in backquotes).
func docClusterACL(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if _, rest, ok := strings.Cut(line, "On Redis Cluster, add `"); ok {
			add, _, _ := strings.Cut(rest, "`")
			return add
		}
	}
	t.Fatal("docs/operations.md does not say what to add on Redis Cluster (On Redis Cluster, add `...`)")
	return ""
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
