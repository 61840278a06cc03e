package main

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/redisbackend/redistest"
)

// readyz returns /readyz's status code and body.
func readyz(t *testing.T, n *node) (int, string) {
	t.Helper()
	r, err := http.Get("http://" + n.httpAddr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r.StatusCode, string(b)
}

// unusedAddr returns a loopback address nothing listens on.
func unusedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestNode_readyz_notReadyUntilJoined(t *testing.T) {
	seed := unusedAddr(t)
	n, _ := startNode(t, "--node-name", "lonely", "--gossip-addr", "127.0.0.1:0", "--join", seed)
	code, body := readyz(t, n)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "gossip join") {
		t.Fatalf("/readyz with an unreachable seed: %d %q, want 503 naming the gossip join", code, body)
	}
	// A node that starts the cluster (no seeds) is ready; one that joins
	// it becomes ready once the join succeeds.
	first, _ := startNode(t, "--node-name", "first", "--gossip-addr", "127.0.0.1:0")
	if code, body := readyz(t, first); code != http.StatusOK {
		t.Fatalf("/readyz of a node with no seeds: %d %q", code, body)
	}
	second, _ := startNode(t, "--node-name", "second", "--gossip-addr", "127.0.0.1:0", "--join", first.members.GossipAddr())
	waitFor(t, 5*time.Second, func() bool { code, _ := readyz(t, second); return code == http.StatusOK })
}

func TestNode_readyz_notReadyUntilRedisTimeSynced(t *testing.T) {
	srv := redistest.Start(t)
	srv.Pause()
	n, _ := startNode(t, "--redis-addr", srv.Addr())
	code, body := readyz(t, n)
	srv.Resume()
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "redis time") {
		t.Fatalf("/readyz before the Redis clock synced: %d %q, want 503 naming the redis time base", code, body)
	}
	// The clock resamples every second; the node becomes ready then.
	waitFor(t, 10*time.Second, func() bool { code, _ := readyz(t, n); return code == http.StatusOK })
}
