package main

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/dnstest"
	"github.com/weirhq/weir/redisbackend/redistest"
)

// TestRedis_silentResolver_nodeReconnects runs a node, with the default
// Redis settings, against a Redis named by a host name, as deploy/ and
// managed Redis name it. The node reaches Redis; then the resolver falls
// silent (a lost UDP packet costs a Go lookup 5 s, a stalled resolver
// longer) and the node's connections are cut, as a timeout under load or
// a Redis restart cuts them. Redis is still up where the name pointed:
// the node must reconnect there and decide strict limits from Redis
// again while the resolver is still silent, rather than fall back for as
// long as DNS is out. (The compose test once lost a SIGTERM hand-off this
// way: "dial tcp: lookup redis: i/o timeout" for the whole 2 s.)
//
// The node runs in a mount namespace of its own (unshare -m) whose
// /etc/resolv.conf names only the test's resolver; it needs root.
func TestRedis_silentResolver_nodeReconnects(t *testing.T) {
	if testing.Short() {
		t.Skip("mount namespace and a resolver on port 53: not in -short mode")
	}
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("the resolver test must run in CI (as root)")
		}
		t.Skip("needs root: a mount namespace and a resolver on port 53")
	}
	const name = "redis.weir.test"
	dnsIP := fmt.Sprintf("127.%d.%d.%d", 10+rand.IntN(200), rand.IntN(250), 2+rand.IntN(250))
	dns := dnstest.Start(t, net.JoinHostPort(dnsIP, "53"))
	dns.Set(name, netip.MustParseAddr("127.0.0.1"))
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver "+dnsIP+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := redistest.Start(t)
	_, port, _ := net.SplitHostPort(srv.Addr())
	policyPath := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policyPath, []byte(connPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "-m", "sh", "-c", `mount --bind "$WEIR_TEST_RESOLV" /etc/resolv.conf && exec "$0"`, os.Args[0])
	p := startProcCmd(t, "node-dns", cmd, "WEIR_TEST_RESOLV="+resolv,
		"WEIR_REDIS_ADDR="+net.JoinHostPort(name, port), "WEIR_POLICY="+policyPath)
	fromRedis := func(within time.Duration) (time.Duration, string) {
		start := time.Now()
		for {
			r := p.decide(t, "tenant", "t1", "api", "a1")
			if r.Fallback == nil {
				return time.Since(start), ""
			}
			if time.Since(start) > within {
				return 0, r.Fallback.GetReason()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if _, reason := fromRedis(15 * time.Second); reason != "" {
		t.Fatalf("with the resolver answering, strict decisions still fall back (%s)", reason)
	}
	dns.Hold()
	if err := srv.Client().Do(t.Context(), "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	held := dns.Queries()
	took, reason := fromRedis(5 * time.Second)
	if reason != "" {
		t.Fatalf("resolver silent, Redis up at the name's address: strict decisions still fall back (%s) after 5s", reason)
	}
	t.Logf("connections cut, resolver silent: strict decisions from Redis again after %s (%d queries unanswered)", took.Round(time.Millisecond), dns.Queries()-held)
	if !strings.Contains(p.out.String(), "name lookup failing; dialling its last addresses") {
		t.Errorf("the node did not log that it dialled the name's last addresses:\n%s", p.out)
	}
}
