package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/weirhq/weir/chaos/history"
	"github.com/weirhq/weir/chaos/netlab"
	"github.com/weirhq/weir/ring"
)

// Ports every node listens on, at its own address.
const (
	grpcPort   = 8081
	httpPort   = 8080
	peerPort   = 8091
	gossipPort = 7946
	redisPort  = 6379
)

// Node is one weir node of the testbed.
type Node struct {
	Name string
	Host *netlab.Host

	mu   sync.Mutex
	proc *netlab.Proc
	left bool // stopped on purpose: not expected among the members
}

func (n *Node) setLeft(left bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.left = left
}

func (n *Node) hasLeft() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.left
}

// GRPCAddr is where clients reach the node.
func (n *Node) GRPCAddr() string { return net.JoinHostPort(n.Host.IP(), strconv.Itoa(grpcPort)) }

func (n *Node) httpURL(path string) string {
	return "http://" + net.JoinHostPort(n.Host.IP(), strconv.Itoa(httpPort)) + path
}

// Proc is the node's current process (a new one after each restart).
func (n *Node) Proc() *netlab.Proc {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc
}

// testbed is one scenario's cluster: the lab, redis-server, the nodes, the
// client's host, and the event log.
type testbed struct {
	lab      *netlab.Lab
	dir      string
	nodeBin  string
	policy   string
	victim   string // the group whose owner a targeted nemesis hits
	redis    *netlab.Host
	redisP   *netlab.Proc
	nodes    []*Node
	client   *netlab.Host
	events   *history.Writer
	logf     func(format string, args ...any)
	faultSeq int
	regions  *regionBed       // nil: one region (region.go)
	cluster  *redisClusterBed // nil: one redis-server (rediscluster.go)
	// leases sums the nodes' lease counters, read with their member
	// counts (watchMembers) and at the end (recordLeases).
	leases leaseTally
}

// newTestbed builds the network and starts redis-server and n nodes, and
// waits until every node sees the whole cluster. On error it has already
// cleaned up what it made.
func newTestbed(ctx context.Context, dir string, opts Options, events *history.Writer, logf func(string, ...any)) (tb *testbed, err error) {
	lab, err := netlab.New("chaos")
	if err != nil {
		return nil, err
	}
	made := &testbed{lab: lab, dir: dir, nodeBin: opts.NodeBin, victim: opts.VictimGroup, events: events, logf: logf}
	tb = made
	defer func() {
		if err != nil {
			made.close() // not tb: "return nil, err" has already set it to nil
			tb = nil
		}
	}()
	tb.policy = filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(tb.policy, opts.Policy, 0o644); err != nil {
		return nil, err
	}
	if tb.redis, err = lab.AddHost("redis"); err != nil {
		return nil, err
	}
	for i := 1; i <= opts.Nodes; i++ {
		h, err := lab.AddHost(fmt.Sprintf("n%d", i))
		if err != nil {
			return nil, err
		}
		tb.nodes = append(tb.nodes, &Node{Name: h.Name(), Host: h})
	}
	if tb.client, err = lab.AddHost("client"); err != nil {
		return nil, err
	}
	if opts.redisCluster {
		err = tb.startRedisCluster(ctx)
	} else {
		err = tb.startRedis(ctx)
	}
	if err != nil {
		return nil, err
	}
	if err := tb.splitRegions(ctx, opts.regions); err != nil {
		return nil, err
	}
	for _, node := range tb.nodes {
		if err := tb.startNode(node); err != nil {
			return nil, err
		}
	}
	if err := tb.waitConverged(ctx, 30*time.Second); err != nil {
		return nil, err
	}
	return tb, nil
}

func (tb *testbed) close() error {
	return tb.lab.Close()
}

func (tb *testbed) redisAddr() string {
	return net.JoinHostPort(tb.redis.IP(), strconv.Itoa(redisPort))
}

// startRedis runs redis-server with an fsync-always append-only file, so a
// SIGKILLed Redis comes back with every write it acknowledged: the chaos
// suite tests weir, not Redis's durability settings.
func (tb *testbed) startRedis(ctx context.Context) error {
	p, err := tb.runRedis(ctx, tb.redis)
	tb.redisP = p
	return err
}

// runRedis starts redis-server on host h (data and log named after it)
// and waits until it answers.
func (tb *testbed) runRedis(ctx context.Context, h *netlab.Host) (*netlab.Proc, error) {
	data := filepath.Join(tb.dir, h.Name())
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	cmd := h.Command("redis-server",
		"--bind", h.IP(), "--port", strconv.Itoa(redisPort),
		"--protected-mode", "no", "--save", "", "--appendonly", "yes", "--appendfsync", "always",
		"--dir", data, "--daemonize", "no")
	p, err := h.Start(cmd, filepath.Join(tb.dir, h.Name()+".log"))
	if err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	addr := net.JoinHostPort(h.IP(), strconv.Itoa(redisPort))
	return p, waitUntil(ctx, 10*time.Second, "redis-server to answer PING", func() error { return ping(addr) })
}

// ping sends one Redis PING.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := io.WriteString(c, "PING\r\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("redis answered %q", strings.TrimSpace(line))
	}
	return nil
}

// startNode starts (or restarts) a node's process. Every node joins all
// the others, so any of them may come back first.
func (tb *testbed) startNode(n *Node) error {
	var join []string
	for _, o := range tb.clusterOf(n) {
		if o != n {
			join = append(join, net.JoinHostPort(o.Host.IP(), strconv.Itoa(gossipPort)))
		}
	}
	ip := n.Host.IP()
	args := []string{
		"--node-name", n.Name,
		"--grpc-addr", net.JoinHostPort(ip, strconv.Itoa(grpcPort)),
		"--http-addr", net.JoinHostPort(ip, strconv.Itoa(httpPort)),
		"--peer-addr", net.JoinHostPort(ip, strconv.Itoa(peerPort)),
		"--gossip-addr", net.JoinHostPort(ip, strconv.Itoa(gossipPort)),
		"--join", strings.Join(join, ","),
		// The testbed's namespaces are an isolated network of its own.
		"--insecure-peer", "--insecure-gossip",
		"--policy", tb.policy,
		"--shutdown-timeout", "5s"}
	args = append(args, tb.redisArgs(n)...)
	cmd := n.Host.Command(tb.nodeBin, append(args, tb.regionArgs(n)...)...)
	p, err := n.Host.Start(cmd, filepath.Join(tb.dir, n.Name+".log"))
	if err != nil {
		return fmt.Errorf("start %s: %w", n.Name, err)
	}
	n.mu.Lock()
	n.proc = p
	n.mu.Unlock()
	return nil
}

// members reads a node's view of the cluster size from its /metrics.
func members(n *Node) (int, error) {
	m, err := scrape(n)
	if err != nil {
		return 0, err
	}
	if m.members <= 0 {
		return 0, errors.New("no weir_cluster_members in /metrics")
	}
	return m.members, nil
}

// waitConverged waits until every node that has not left answers and
// counts exactly the nodes that have not left as members.
func (tb *testbed) waitConverged(ctx context.Context, limit time.Duration) error {
	return waitUntil(ctx, limit, "every node to see the whole cluster", func() error {
		live := tb.live()
		for _, n := range live {
			m, err := members(n)
			if err != nil {
				return fmt.Errorf("%s: %w", n.Name, err)
			}
			if want := len(tb.sameCluster(n, live)); m != want {
				return fmt.Errorf("%s sees %d of %d members", n.Name, m, want)
			}
		}
		return nil
	})
}

// live is the nodes that have not left on purpose.
func (tb *testbed) live() []*Node {
	var out []*Node
	for _, n := range tb.nodes {
		if !n.hasLeft() {
			out = append(out, n)
		}
	}
	return out
}

// owner is the node that owns group when every node is up: the same ring
// the nodes build.
func (tb *testbed) owner(group string) *Node {
	names := make([]string, len(tb.nodes))
	for i, n := range tb.nodes {
		names[i] = n.Name
	}
	r, err := ring.New(ring.DefaultConfig(), names...)
	if err != nil {
		return tb.nodes[0]
	}
	name, _ := r.Owner(group)
	for _, n := range tb.nodes {
		if n.Name == name {
			return n
		}
	}
	return tb.nodes[0]
}

// stopNode sends SIGTERM and waits for a graceful exit (hand-off, leave).
func (tb *testbed) stopNode(ctx context.Context, n *Node, limit time.Duration) error {
	p := n.Proc()
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.Done():
		return nil
	case <-time.After(limit):
		p.Kill()
		return fmt.Errorf("%s did not exit within %s of SIGTERM", n.Name, limit)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// event records what the nemesis did.
func (tb *testbed) event(e history.Event) {
	e.Time = time.Now().UnixNano()
	tb.events.Event(e)
	tb.events.Flush()
	what := e.Fault
	if what == "" {
		what = e.Detail
	}
	tb.logf("  %s %s %v", e.Kind, what, e.Nodes)
}

// waitUntil polls check every 100 ms until it succeeds, limit passes (the
// error names what was awaited and check's last error), or ctx is done.
func waitUntil(ctx context.Context, limit time.Duration, what string, check func() error) error {
	deadline := time.Now().Add(limit)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %s for %s: %w", limit, what, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func nodeNames(ns []*Node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Name
	}
	return out
}

func hosts(ns []*Node) []*netlab.Host {
	out := make([]*netlab.Host, len(ns))
	for i, n := range ns {
		out[i] = n.Host
	}
	return out
}
