package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// These tests run real memberlist instances on 127.0.0.1 with the local
// profile, on ports the kernel picks. They wait on Changes (or poll a
// metric) up to a deadline; they never sleep for a fixed time.

// detectTimeout bounds waits that depend on failure detection: the local
// profile suspects a node after ~1s of failed probes and declares it dead
// after a suspicion timeout of a few seconds more.
const detectTimeout = 20 * time.Second

type node struct {
	*Membership
	reg *prometheus.Registry
}

func testConfig(name string, join ...string) Config {
	return Config{
		NodeName:       name,
		BindAddr:       "127.0.0.1:0",
		Join:           join,
		RejoinInterval: 200 * time.Millisecond,
		GRPCAddr:       "grpc-" + name,
		Region:         "r1",
		Profile:        ProfileLocal,
		FailedMemory:   time.Minute,
	}
}

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("WEIR_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
}

func start(t *testing.T, cfg Config) node {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := Start(t.Context(), cfg, testLogger(t), reg)
	if err != nil {
		t.Fatalf("Start(%s): %v", cfg.NodeName, err)
	}
	t.Cleanup(func() {
		if err := m.Shutdown(); err != nil {
			t.Errorf("Shutdown(%s): %v", cfg.NodeName, err)
		}
	})
	return node{m, reg}
}

func names(ms []Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return out
}

// waitMembers waits until n's members are exactly want, re-checking on
// every Changes signal.
func waitMembers(t *testing.T, n node, timeout time.Duration, want ...string) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		got := names(n.Members())
		if slices.Equal(got, want) {
			return
		}
		select {
		case <-n.Changes():
		case <-deadline.C:
			t.Fatalf("%s: members %v, want %v after %v", n.LocalName(), got, want, timeout)
		}
	}
}

// waitFor polls cond, for conditions no Changes signal announces.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
}

func rejoins(n node, result string) float64 {
	return testutil.ToFloat64(n.metrics.rejoins.WithLabelValues(result))
}

// freeAddr returns 127.0.0.1:port with the port free for TCP and UDP when
// checked. Another process could take it before use; tests accept that.
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 10 {
		tl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := tl.Addr().String()
		ul, err := net.ListenPacket("udp", addr)
		_ = tl.Close()
		if err == nil {
			_ = ul.Close()
			return addr
		}
	}
	t.Fatal("no free TCP+UDP port")
	return ""
}

func startThree(t *testing.T) (a, b, c node) {
	t.Helper()
	a = start(t, testConfig("a"))
	b = start(t, testConfig("b", a.GossipAddr()))
	c = start(t, testConfig("c", a.GossipAddr()))
	for _, n := range []node{a, b, c} {
		waitMembers(t, n, 5*time.Second, "a", "b", "c")
	}
	return a, b, c
}

func TestStart_threeNodesOnOneIP(t *testing.T) {
	a, b, c := startThree(t)
	addrs := map[string]string{"a": a.GossipAddr(), "b": b.GossipAddr(), "c": c.GossipAddr()}
	for _, n := range []node{a, b, c} {
		for _, m := range n.Members() {
			want := Member{Name: m.Name, GossipAddr: addrs[m.Name], GRPCAddr: "grpc-" + m.Name, Region: "r1"}
			if m != want {
				t.Errorf("%s sees %+v, want %+v", n.LocalName(), m, want)
			}
		}
		if got := testutil.ToFloat64(n.metrics.members); got != 3 {
			t.Errorf("%s: weir_cluster_members = %v, want 3", n.LocalName(), got)
		}
		if testutil.ToFloat64(n.metrics.changes) < 3 {
			t.Errorf("%s: fewer than 3 membership changes counted", n.LocalName())
		}
	}
	if n, err := testutil.GatherAndCount(b.reg); err != nil || n != 4 {
		t.Errorf("registry holds %d series (%v), want 4", n, err)
	}
}

func TestMembership_Leave(t *testing.T) {
	a, b, c := startThree(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := c.Leave(ctx); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	// A graceful leave is gossiped at once; no failure detection needed.
	waitMembers(t, a, 5*time.Second, "a", "b")
	waitMembers(t, b, 5*time.Second, "a", "b")
	if slices.Contains(names(c.Members()), "c") {
		t.Errorf("c still lists itself after leaving: %v", names(c.Members()))
	}
	for _, n := range []node{a, b} {
		if got := n.Failed(); len(got) != 0 {
			t.Errorf("%s reports %v failed after a graceful leave", n.LocalName(), got)
		}
	}
}

func TestMembership_Shutdown_withoutLeave(t *testing.T) {
	a, b, c := startThree(t)
	if err := c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := c.Shutdown(); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	if err := c.Leave(t.Context()); err != ErrShutdown {
		t.Fatalf("Leave after Shutdown = %v, want ErrShutdown", err)
	}
	waitMembers(t, a, detectTimeout, "a", "b")
	waitMembers(t, b, detectTimeout, "a", "b")
	for _, n := range []node{a, b} {
		if got := n.Failed(); !slices.Equal(got, []string{"c"}) {
			t.Errorf("%s reports %v failed, want [c]", n.LocalName(), got)
		}
	}
}

// TestMembership_rejoin_seedStartsLater starts b with a seed that does not
// exist yet; b's rejoin loop must find a once it starts.
func TestMembership_rejoin_seedStartsLater(t *testing.T) {
	aAddr := freeAddr(t)
	b := start(t, testConfig("b", aAddr))
	if got := names(b.Members()); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("b alone: members %v", got)
	}
	if rejoins(b, resultFailure) < 1 {
		t.Fatal("failed initial join not counted")
	}
	if b.Joined() {
		t.Fatal("b reports joined before any join succeeded")
	}
	cfg := testConfig("a")
	cfg.BindAddr = aAddr
	a := start(t, cfg)
	if !a.Joined() {
		t.Fatal("a, which has no seeds, does not report joined")
	}
	waitMembers(t, a, 5*time.Second, "a", "b")
	waitMembers(t, b, 5*time.Second, "a", "b")
	// The member table fills during the join's push/pull, just before
	// Join returns and the attempt is counted.
	waitFor(t, 5*time.Second, "b to count a successful rejoin", func() bool {
		return rejoins(b, resultSuccess) >= 1
	})
	if !b.Joined() {
		t.Fatal("b does not report joined after its rejoin succeeded")
	}
}

// TestMembership_rejoin_afterBothSidesGaveUp is a healed partition: b has
// declared a dead, and a comes back knowing nothing of b (it restarts on its
// old address with no seeds). memberlist alone would leave them apart; b's
// rejoin loop merges them.
func TestMembership_rejoin_afterBothSidesGaveUp(t *testing.T) {
	a := start(t, testConfig("a"))
	aAddr := a.GossipAddr()
	b := start(t, testConfig("b", aAddr))
	waitMembers(t, b, 5*time.Second, "a", "b")

	if err := a.Shutdown(); err != nil {
		t.Fatal(err)
	}
	waitMembers(t, b, detectTimeout, "b")
	before := rejoins(b, resultSuccess)

	cfg := testConfig("a")
	cfg.BindAddr = aAddr
	a2 := start(t, cfg)
	waitMembers(t, a2, 5*time.Second, "a", "b")
	waitMembers(t, b, 5*time.Second, "a", "b")
	waitFor(t, 5*time.Second, "b to count a successful rejoin", func() bool {
		return rejoins(b, resultSuccess) > before
	})
	if got := b.Failed(); len(got) != 0 {
		t.Errorf("b still reports %v failed after a came back", got)
	}
}

func TestStart_secretKey(t *testing.T) {
	key := []byte("0123456789abcdef")
	withKey := func(name string, key []byte, join ...string) Config {
		c := testConfig(name, join...)
		c.SecretKey = key
		return c
	}
	a := start(t, withKey("a", key))
	b := start(t, withKey("b", key, a.GossipAddr()))
	waitMembers(t, a, 5*time.Second, "a", "b")
	waitMembers(t, b, 5*time.Second, "a", "b")

	c := start(t, withKey("c", []byte("fedcba9876543210"), a.GossipAddr()))
	// Start's join has failed; wait for two more failed rejoins.
	waitFor(t, 5*time.Second, "c to fail rejoining twice more", func() bool {
		return rejoins(c, resultFailure) >= 3
	})
	if got := names(c.Members()); !slices.Equal(got, []string{"c"}) {
		t.Errorf("c with another key sees %v", got)
	}
	if got := names(a.Members()); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("a sees %v, want [a b]", got)
	}
	if rejoins(c, resultSuccess) != 0 {
		t.Error("c counted a successful join")
	}
}

func TestStart_errors(t *testing.T) {
	if _, err := Start(t.Context(), Config{}, nil, nil); err == nil {
		t.Error("Start with an invalid config succeeded")
	}
	a := start(t, testConfig("a"))
	cfg := testConfig("a2")
	cfg.BindAddr = a.GossipAddr()
	if _, err := Start(t.Context(), cfg, nil, nil); err == nil {
		t.Error("Start on a port in use succeeded")
	}
	if _, err := Start(t.Context(), testConfig("a3"), nil, a.reg); err == nil {
		t.Error("Start registering metrics twice succeeded")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Start(ctx, testConfig("a4", a.GossipAddr()), nil, nil); err == nil {
		t.Error("Start with a cancelled context succeeded")
	}
}

func Example() {
	ctx := context.Background()
	cfg := DefaultConfig()
	cfg.NodeName, cfg.BindAddr, cfg.Profile = "node-a", "127.0.0.1:0", ProfileLocal
	cfg.GRPCAddr = "127.0.0.1:8081"
	m, err := Start(ctx, cfg, nil, nil)
	if err != nil {
		panic(err)
	}
	defer m.Shutdown()
	for _, mem := range m.Members() {
		fmt.Println(mem.Name, mem.GRPCAddr)
	}
	_, port, _ := net.SplitHostPort(m.GossipAddr())
	p, _ := strconv.Atoi(port)
	fmt.Println(p > 0)
	// Output:
	// node-a 127.0.0.1:8081
	// true
}

// TestStart_keyedClusterRefusesMemberWithoutKey: gossip encryption is also
// authentication; a member with no key at all must not get in.
func TestStart_keyedClusterRefusesMemberWithoutKey(t *testing.T) {
	keyed := func(name string, join ...string) Config {
		c := testConfig(name, join...)
		c.SecretKey = []byte("0123456789abcdef")
		return c
	}
	a := start(t, keyed("a"))
	b := start(t, keyed("b", a.GossipAddr()))
	waitMembers(t, a, 5*time.Second, "a", "b")

	rogue := start(t, testConfig("rogue", a.GossipAddr()))
	waitFor(t, 5*time.Second, "the keyless member to fail joining three times", func() bool {
		return rejoins(rogue, resultFailure) >= 3
	})
	for _, n := range []node{a, b} {
		if got := names(n.Members()); !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("%s sees %v, want [a b]", n.LocalName(), got)
		}
	}
	if got := names(rogue.Members()); !slices.Equal(got, []string{"rogue"}) {
		t.Errorf("the keyless member sees %v", got)
	}
}

// TestMembership_SetKeys_rotation rotates a two-member cluster from key 1
// to key 2 in the documented three rounds without losing a member; then a
// member with only key 2 joins and a member with only key 1 cannot.
func TestMembership_SetKeys_rotation(t *testing.T) {
	k1, k2 := []byte("0123456789abcdef"), []byte("fedcba9876543210")
	keyed := func(name string, key []byte, join ...string) Config {
		c := testConfig(name, join...)
		c.SecretKey = key
		return c
	}
	a := start(t, keyed("a", k1))
	b := start(t, keyed("b", k1, a.GossipAddr()))
	waitMembers(t, a, 5*time.Second, "a", "b")
	for _, round := range []struct {
		primary   []byte
		secondary [][]byte
	}{
		{k1, [][]byte{k2}}, // install the new key everywhere
		{k2, [][]byte{k1}}, // encrypt with it everywhere
		{k2, nil},          // drop the old one
	} {
		for _, n := range []node{a, b} {
			if err := n.SetKeys(round.primary, round.secondary); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := a.keyring.GetKeys(); len(got) != 1 || !slices.Equal(got[0], k2) {
		t.Fatalf("a's keyring after rotation holds %d keys, want only key 2", len(got))
	}
	c := start(t, keyed("c", k2, a.GossipAddr()))
	waitMembers(t, a, 5*time.Second, "a", "b", "c")
	old := start(t, keyed("old", k1, a.GossipAddr()))
	waitFor(t, 5*time.Second, "a member with the retired key to fail joining", func() bool {
		return rejoins(old, resultFailure) >= 2
	})
	if got := names(c.Members()); slices.Contains(got, "old") {
		t.Errorf("a member with the retired key got in: %v", got)
	}
	if err := a.SetKeys(make([]byte, 7), nil); err == nil {
		t.Error("SetKeys accepted a 7-byte key")
	}
	if err := old.SetKeys(k2, nil); err != nil {
		t.Errorf("SetKeys on a keyed member: %v", err)
	}
	plain := start(t, testConfig("plain"))
	if err := plain.SetKeys(k2, nil); !errors.Is(err, ErrNoKeyring) {
		t.Errorf("SetKeys without encryption = %v, want ErrNoKeyring", err)
	}
}
