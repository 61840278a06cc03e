package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/chaos/netlab"
)

// nsNode is one node process in a netlab host.
type nsNode struct {
	host *netlab.Host
	proc *netlab.Proc
	log  string
}

func (n *nsNode) url(path string) string {
	return "http://" + net.JoinHostPort(n.host.IP(), "8080") + path
}

// metric sums n's samples of name whose labels contain every one of
// labels; -1 when /metrics does not answer.
func (n *nsNode) metric(name string, labels ...string) float64 {
	return scrapeSum(&http.Client{Timeout: time.Second}, n.url("/metrics"), name, labels...)
}

// startLab makes a netlab lab for a test, skipping where this machine
// cannot host one (not root, no ip or nft), except under CI=true.
func startLab(t *testing.T) *netlab.Lab {
	t.Helper()
	if testing.Short() {
		t.Skip("network namespaces: not in -short mode")
	}
	lab, err := netlab.New("wildcard")
	if errors.Is(err, netlab.ErrUnsupported) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("network namespace test must run in CI: %v", err)
		}
		t.Skipf("network namespaces: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lab.Close(); err != nil {
			t.Error(err)
		}
	})
	return lab
}

// TestCluster_netns_wildcardBindAdvertisesReachableAddresses runs three
// real nodes, each in a network namespace of its own, bound to 0.0.0.0 on
// every listener and given no --advertise-addr, as deploy/compose.yaml
// runs them. Each must gossip its own namespace's address, so decisions
// at every node reach their owners (forwards ok, no ownership_changing
// fallbacks) and Topology names addresses clients can dial.
func TestCluster_netns_wildcardBindAdvertisesReachableAddresses(t *testing.T) {
	nodes := startWildcardNodes(t, startLab(t), 3)
	waitFor(t, 20*time.Second, func() bool {
		for _, n := range nodes {
			select {
			case <-n.proc.Done():
				t.Fatalf("%s exited: %v", n.host.Name(), n.proc.Wait())
			default:
			}
			if n.metric("weir_cluster_members") != 3 {
				return false
			}
		}
		return true
	})
	for _, n := range nodes {
		checkTopology(t, n, nodes)
	}
	for _, n := range nodes {
		for g := range 30 { // 30 groups, one key per node in each: never denied
			body := fmt.Sprintf(`{"descriptors":{"tenant":"t%d","user":%q}}`, g, n.host.Name())
			resp, err := http.Post(n.url("/v1/decide"), "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("decide at %s: %s %s", n.host.Name(), resp.Status, b)
			}
		}
	}
	for _, n := range nodes {
		ok := n.metric("weir_forwards_total", `result="ok"`)
		notOwner := n.metric("weir_forwards_total", `result="not_owner"`)
		changing := n.metric("weir_fallback_decisions_total", `reason="ownership_changing"`)
		// A forward without a caller deadline waits the owner's observed
		// round trip (at least 20 ms): on a loaded machine the first one,
		// which also dials, may miss it and fall back (owner_unreachable,
		// by design; docs/architecture.md, "Slow is not dead").
		slow := n.metric("weir_forwards_total", `result="timeout"`)
		t.Logf("%s: forwards ok %v, timeout %v, not_owner %v, ownership_changing fallbacks %v", n.host.Name(), ok, slow, notOwner, changing)
		if ok <= 0 || notOwner != 0 || changing != 0 {
			t.Errorf("%s: forwards ok %v (want > 0), not_owner %v and ownership_changing fallbacks %v (want 0)", n.host.Name(), ok, notOwner, changing)
		}
	}
}

// startWildcardNodes starts count nodes, one per new host of lab, every
// listener on 0.0.0.0, each joining all the others, with the defaults
// otherwise (no Redis, the built-in policy). Their logs are shown when the
// test fails.
func startWildcardNodes(t *testing.T, lab *netlab.Lab, count int) []*nsNode {
	t.Helper()
	dir := t.TempDir()
	var nodes []*nsNode
	for i := 1; i <= count; i++ {
		h, err := lab.AddHost(fmt.Sprintf("w%d", i))
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, &nsNode{host: h, log: filepath.Join(dir, h.Name()+".log")})
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range nodes {
				b, _ := os.ReadFile(n.log)
				t.Logf("--- log of %s ---\n%s", n.host.Name(), b)
			}
		}
	})
	for _, n := range nodes {
		var join []string
		for _, o := range nodes {
			if o != n {
				join = append(join, net.JoinHostPort(o.host.IP(), "7946"))
			}
		}
		cmd := n.host.Command(os.Args[0], "--node-name", n.host.Name(),
			"--grpc-addr", "0.0.0.0:8081", "--http-addr", "0.0.0.0:8080", "--peer-addr", "0.0.0.0:8091",
			"--gossip-addr", "0.0.0.0:7946", "--join", strings.Join(join, ","),
			"--insecure-peer", "--insecure-gossip") // the lab is an isolated network of its own
		cmd.Env = append(os.Environ(), "WEIR_TEST_RUN_NODE=1")
		p, err := n.host.Start(cmd, n.log)
		if err != nil {
			t.Fatal(err)
		}
		n.proc = p
	}
	return nodes
}

// checkTopology asks n's public gRPC listener for the topology and wants
// every member at its own namespace's address.
func checkTopology(t *testing.T, n *nsNode, nodes []*nsNode) {
	t.Helper()
	conn, err := grpc.NewClient(net.JoinHostPort(n.host.IP(), "8081"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := weirv1.NewRateLimiterClient(conn).Topology(ctx, &weirv1.TopologyRequest{})
	if err != nil {
		t.Fatalf("topology at %s: %v", n.host.Name(), err)
	}
	want := map[string]string{}
	for _, o := range nodes {
		want[o.host.Name()] = net.JoinHostPort(o.host.IP(), "8081")
	}
	got := map[string]string{}
	for _, m := range resp.GetMembers() {
		got[m.GetName()] = m.GetAddress()
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("topology at %s: members %v, want %v", n.host.Name(), got, want)
	}
}
