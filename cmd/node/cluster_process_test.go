package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/redisbackend"
	"github.com/weirhq/weir/redisbackend/redistest"
	"github.com/weirhq/weir/ring"
)

var gossipRE = regexp.MustCompile(`msg="gossip started" node=\S+ gossip=(\S+)`)

// proc is one cmd/node process started by a test.
type proc struct {
	name             string
	cmd              *exec.Cmd
	out              *syncBuffer
	exited           chan error
	grpcAddr, httpAd string
	gossipAddr       string
	client           weirv1.RateLimiterClient
}

// startProc runs this test binary as a node (see TestMain) with the given
// WEIR_* settings and waits until it logs its addresses.
func startProc(t *testing.T, name string, env ...string) *proc {
	t.Helper()
	return startProcCmd(t, name, exec.Command(os.Args[0]), env...)
}

// startProcCmd is startProc with the command that runs the test binary
// given: cmd may wrap it (in a namespace, say), as long as it ends by
// executing it with the environment it is given.
func startProcCmd(t *testing.T, name string, cmd *exec.Cmd, env ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: cmd, out: &syncBuffer{}, exited: make(chan error, 1)}
	p.cmd.Env = append(os.Environ(), append([]string{"WEIR_TEST_RUN_NODE=1", "WEIR_NODE_NAME=" + name,
		"WEIR_GRPC_ADDR=127.0.0.1:0", "WEIR_HTTP_ADDR=127.0.0.1:0", "WEIR_PEER_ADDR=127.0.0.1:0", "WEIR_ADMIN_ADDR=127.0.0.1:0", "WEIR_GOSSIP_ADDR=127.0.0.1:0"}, env...)...)
	p.cmd.Stderr = p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		if p.cmd.Process != nil {
			p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("--- log of %s ---\n%s", name, p.out)
		}
	})
	waitFor(t, 20*time.Second, func() bool {
		m, g := listeningRE.FindStringSubmatch(p.out.String()), gossipRE.FindStringSubmatch(p.out.String())
		if m == nil || g == nil {
			return false
		}
		p.grpcAddr, p.httpAd, p.gossipAddr = m[1], m[2], g[1]
		return true
	})
	conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	p.client = weirv1.NewRateLimiterClient(conn)
	return p
}

// members reads the node's view of the cluster size from /metrics.
func (p *proc) members() int {
	resp, err := http.Get("http://" + p.httpAd + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var n int
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "weir_cluster_members ") {
			fmt.Sscan(strings.TrimPrefix(line, "weir_cluster_members "), &n)
		}
	}
	return n
}

// kill SIGKILLs p and waits until it has exited and its log is complete.
func (p *proc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	p.cmd.Process = nil // nothing left for the cleanup to kill
}

// waitMembers waits until every one of ps counts n cluster members.
func waitMembers(t *testing.T, within time.Duration, n int, ps ...*proc) {
	t.Helper()
	waitFor(t, within, func() bool {
		for _, p := range ps {
			if p.members() != n {
				return false
			}
		}
		return true
	})
}

// trio is three node processes, node-a, node-b and node-c, in one cluster,
// sharing one redis-server and one policy file.
type trio struct {
	redis *redistest.Server
	nodes []*proc
}

// startTrio starts a redis-server and three nodes on it that load
// policyYAML, with the extra WEIR_* settings env, and waits until each
// node counts all three as members.
func startTrio(t *testing.T, policyYAML string, env ...string) trio {
	t.Helper()
	srv := redistest.Start(t)
	policyPath := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policyPath, []byte(policyYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	// A generous Redis timeout: these tests kill an owner, and the 50ms
	// default made the new owner's first load fail on a loaded machine.
	common := slices.Concat([]string{"WEIR_REDIS_ADDR=" + srv.Addr(), "WEIR_POLICY=" + policyPath, "WEIR_REDIS_TIMEOUT=1s"}, env)
	a := startProc(t, "node-a", common...)
	join := "WEIR_JOIN=" + a.gossipAddr
	tr := trio{redis: srv, nodes: []*proc{a,
		startProc(t, "node-b", append(slices.Clip(common), join)...),
		startProc(t, "node-c", append(slices.Clip(common), join)...)}}
	waitMembers(t, 20*time.Second, 3, tr.nodes...)
	return tr
}

// ownerOf returns the node among ps that owns group on a ring of ps, and the
// others.
func ownerOf(group string, ps []*proc) (*proc, []*proc) {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.name
	}
	r, _ := ring.New(ring.DefaultConfig(), names...)
	name, _ := r.Owner(group)
	i := slices.IndexFunc(ps, func(p *proc) bool { return p.name == name })
	return ps[i], slices.Concat(ps[:i], ps[i+1:])
}

// split returns the owner of group on the three-node ring and the others.
func (tr trio) split(group string) (*proc, []*proc) { return ownerOf(group, tr.nodes) }

func (p *proc) decide(t *testing.T, kv ...string) *weirv1.DecideResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	d := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		d[kv[i]] = kv[i+1]
	}
	r, err := p.client.Decide(ctx, &weirv1.DecideRequest{Descriptors: d, Cost: new(int64(1))})
	if err != nil {
		t.Fatalf("decide at %s: %v", p.name, err)
	}
	return r
}

// TestCluster_process_ownerKilledKeepsTATs runs three real node processes on
// one IP with different ports and one redis-server. Requests for one key go
// through every node; then the key's owner is killed with SIGKILL. The
// survivors must converge on a two-node ring, keep deciding, and the key
// must not come back with a fresh burst.
func TestCluster_process_ownerKilledKeepsTATs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three node processes and waits for failure detection")
	}
	tr := startTrio(t, "version: proc\nlimits:\n  - {name: per-user, match: [tenant, user], rate: 1/m, burst: 5}\n")
	nodes, srv := tr.nodes, tr.redis
	owner, survivors := tr.split("t1")
	for i := range 5 { // the whole burst, spread over every node
		if d := nodes[i%3].decide(t, "tenant", "t1", "user", "u1"); !d.Allowed || d.Fallback != nil {
			t.Fatalf("request %d: %+v", i, d)
		}
	}
	if d := survivors[0].decide(t, "tenant", "t1", "user", "u1"); d.Allowed {
		t.Fatal("sixth request within the burst window admitted")
	}
	// A SIGKILL loses what the owner had not yet flushed (docs/architecture.md
	// bounds it); this test is about hand-off, so wait until Redis holds the
	// TAT of all five admissions: 5 x 60s ahead, so an expiry over 4 x 60s
	// plus the expiry grace every persisted TAT gets.
	waitFor(t, 5*time.Second, func() bool {
		return srv.Client().PTTL(context.Background(), "weir:{t1}:per-user:t1:u1").Val() > 240*time.Second+redisbackend.ExpiryGrace
	})

	owner.kill()
	waitMembers(t, 30*time.Second, 2, survivors...)
	for _, p := range survivors {
		d := p.decide(t, "tenant", "t1", "user", "u1")
		if d.Allowed || d.Fallback != nil {
			t.Fatalf("after the owner died, %s answered %+v: want a normal denial (TAT kept)", p.name, d)
		}
		if d := p.decide(t, "tenant", "t2", "user", "u1"); !d.Allowed || d.Fallback != nil {
			t.Fatalf("%s stopped deciding other keys: %+v", p.name, d)
		}
	}
}
