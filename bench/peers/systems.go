package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	guber "github.com/gubernator-io/gubernator/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// binaries are the built servers.
type binaries struct {
	node, gubernator, ratelimit string
	base                        string // -base-node: another weir node binary to measure beside node; "" for none
}

// system is one thing measured: how to start it and how to ask it.
type system struct {
	name string
	// start runs the system's processes in ps and returns how to reach
	// them once every node answers.
	start func(ctx context.Context, ps *procs, b binaries) (started, error)
	// dial returns the client's deciders, cfg.conns per node, and the
	// function that closes them.
	dial func(ctx context.Context, st started, cfg config) ([]decider, func(), error)
	// leased also drives the leasable hot key through each node in turn
	// (weir with several nodes only).
	leased bool
}

// started is a running system.
type started struct {
	addrs []string // client (gRPC) address of every node
	names []string // weir: node names, by node
	admin []string // weir: admin listener addresses, by node
	redis string   // host:port of the system's Redis; "" without one
}

// systems lists everything `make bench-peers` compares, in table order;
// with base, also the weir systems run with the -base-node binary, named
// with baseSuffix (so that a change is measured against its base in one
// run; issue 24's targets read only the rows without it).
func systems(base bool) []system {
	guberDefault := func(cc grpc.ClientConnInterface) decider { return newGuberDecider(cc, guber.Behavior_BATCHING) }
	guberGlobal := func(cc grpc.ClientConnInterface) decider { return newGuberDecider(cc, guber.Behavior_GLOBAL) }
	all := []system{
		{name: weirOne, start: startWeir(weirSetup{nodes: 1}), dial: dialEach(newRLSDecider)},
		{name: weirThree, start: startWeir(weirSetup{nodes: 3, redis: true}), dial: dialEach(newRLSDecider), leased: true},
		{name: weirRouted, start: startWeir(weirSetup{nodes: 3, redis: true}), dial: dialRouted},
		{name: weirLone, start: startWeir(weirSetup{nodes: 3, lone: true}), dial: dialEach(newRLSDecider)},
		{name: "gubernator, 1 node", start: startGubernator(1), dial: dialEach(guberDefault)},
		{name: "gubernator, 3 nodes", start: startGubernator(3), dial: dialEach(guberDefault)},
		{name: "gubernator, 3 nodes, GLOBAL", start: startGubernator(3), dial: dialEach(guberGlobal)},
		{name: ratelimitName, start: startRatelimit, dial: dialEach(newRLSDecider)},
	}
	if !base {
		return all
	}
	return append(all,
		system{name: weirOne + baseSuffix, start: startWeir(weirSetup{nodes: 1, base: true}), dial: dialEach(newRLSDecider)},
		system{name: weirThree + baseSuffix, start: startWeir(weirSetup{nodes: 3, redis: true, base: true}), dial: dialEach(newRLSDecider)},
		system{name: weirRouted + baseSuffix, start: startWeir(weirSetup{nodes: 3, redis: true, base: true}), dial: dialRouted})
}

// baseSuffix ends the names of the systems run with the -base-node binary.
const baseSuffix = " (base)"

// dialEach returns a dial that opens conns connections to every node,
// interleaved (node 0, 1, 2, 0, 1, 2...), each asked through newDecider.
func dialEach(newDecider func(grpc.ClientConnInterface) decider) func(context.Context, started, config) ([]decider, func(), error) {
	return func(_ context.Context, st started, cfg config) ([]decider, func(), error) {
		var ds []decider
		var ccs []*grpc.ClientConn
		closeAll := func() {
			for _, cc := range ccs {
				cc.Close()
			}
		}
		for range cfg.conns {
			for _, a := range st.addrs {
				cc, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					closeAll()
					return nil, nil, fmt.Errorf("dial %s: %w", a, err)
				}
				cc.Connect()
				ccs = append(ccs, cc)
				ds = append(ds, newDecider(cc))
			}
		}
		return ds, closeAll, nil
	}
}

// weirPolicy is the bench's limits: bench-key answers Envoy's domain
// rlsDomain (the plain client), bench-v1 the same numbers over weir.v1
// (the routed client: a limit with a domain answers RLS only), and
// bench-leased the leasable hot key, over RLS.
var weirPolicy = fmt.Sprintf(`version: bench-peers
limits:
  - name: bench-key
    domain: %[1]s
    match: [%[2]s]
    rate: %[3]d/s
    burst: %[4]d
  - name: %[5]s
    match: [%[2]s]
    rate: %[3]d/s
    burst: %[4]d
  - name: %[6]s
    domain: %[1]s
    match: [%[7]s]
    rate: %[8]d/s
    burst: %[9]d
    lease: {max: %[10]d, ttl: %[11]s}
`, rlsDomain, rlsKey, limitPerSecond, limitBurst, weirV1Limit,
	leasedLimitName, leasedEntry, leasedLimit.perSecond, leasedLimit.burst, leasedMax, leasedTTL)

// weirSetup is how startWeir runs weir.
type weirSetup struct {
	nodes int
	// lone: the nodes do not gossip, each deciding every key alone in its
	// own memory (three processes' cost with no forwarding: a floor under
	// the cluster's, not a limiter; it admits each key's limit once per
	// node).
	lone  bool
	redis bool // one redis-server every node uses
	base  bool // the -base-node binary instead of this tree's
}

// startWeir starts the nodes of s, gossiping with each other when there
// are several and not s.lone.
func startWeir(s weirSetup) func(context.Context, *procs, binaries) (started, error) {
	n, redis, base := s.nodes, s.redis, s.base
	cluster := n > 1 && !s.lone
	return func(ctx context.Context, ps *procs, b binaries) (started, error) {
		var st started
		policy := filepath.Join(ps.dir, "weir-policy.yaml")
		if err := os.WriteFile(policy, []byte(weirPolicy), 0o600); err != nil {
			return st, fmt.Errorf("peers: %w", err)
		}
		if redis {
			var err error
			if st.redis, err = startRedis(ctx, ps, "weir-redis"); err != nil {
				return st, err
			}
		}
		addrs, err := freeAddrs(5 * n) // grpc, http, peer, admin, gossip per node
		if err != nil {
			return st, err
		}
		var nodes []*proc
		for i := range n {
			a := addrs[5*i : 5*i+5]
			name := "n" + strconv.Itoa(i)
			st.addrs, st.names, st.admin = append(st.addrs, a[0]), append(st.names, name), append(st.admin, a[3])
			args := []string{
				"--node-name", name, "--policy", policy, "--log-level", "warn",
				"--grpc-addr", a[0], "--http-addr", a[1], "--peer-addr", a[2], "--admin-addr", a[3],
			}
			if cluster {
				args = append(args, "--gossip-addr", a[4])
				if i > 0 {
					args = append(args, "--join", addrs[4])
				}
			}
			if redis {
				args = append(args, "--redis-addr", st.redis)
			}
			bin := b.node
			if base {
				bin = b.base
			}
			p, err := ps.start("weir-"+name, bin, args, nil)
			if err != nil {
				return st, err
			}
			nodes = append(nodes, p)
		}
		members := 1
		if cluster {
			members = n
		}
		for i, p := range nodes {
			httpAddr, adminAddr := addrs[5*i+1], addrs[5*i+3]
			if err := waitFor(ctx, p, "ready with all members", func(ctx context.Context) error {
				return weirReady(ctx, httpAddr, adminAddr, members)
			}); err != nil {
				return st, err
			}
		}
		if cluster {
			// An owner loads a key absent from its memory until its ring
			// has held still for the key's span plus the load rule's
			// margin (owner.Config.Rested, 2 s); measure the stable
			// cluster the Redis figure is about, not its first
			// seconds (docs/benchmarks.md says so beside the table).
			select {
			case <-time.After(ringSettle):
			case <-ctx.Done():
				return st, ctx.Err()
			}
		}
		return st, probe(ctx, nodes, st.addrs, newRLSDecider)
	}
}

// ringSettle is how long a weir cluster runs after its last member joined
// before it is measured: more than the load rule's default margin (2 s)
// plus the bench limits' spans (at most 350 ms).
const ringSettle = 3 * time.Second

// weirReady checks a node's /readyz and that its admin status lists n
// members.
func weirReady(ctx context.Context, httpAddr, adminAddr string, n int) error {
	if err := httpGet(ctx, "http://"+httpAddr+"/readyz", nil); err != nil {
		return err
	}
	var st struct {
		Members []string `json:"members"`
	}
	if err := httpGet(ctx, "http://"+adminAddr+"/admin/status", &st); err != nil {
		return err
	}
	if len(st.Members) != n {
		return fmt.Errorf("%d members %v, want %d", len(st.Members), st.Members, n)
	}
	return nil
}

// httpGet expects 200 and decodes the JSON body into out unless out is nil.
func httpGet(ctx context.Context, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// startGubernator starts n gubernator daemons that find each other through
// memberlist (node 0 is every node's known node). Node i listens on
// loopback address 127.0.0.(i+1): v2.13.0 keeps its memberlist peers by IP,
// so daemons sharing one IP replace each other in its peer list.
func startGubernator(n int) func(context.Context, *procs, binaries) (started, error) {
	return func(ctx context.Context, ps *procs, b binaries) (started, error) {
		var addrs []string // grpc, http, memberlist per node
		for i := range n {
			a, err := freeAddrsOn("127.0.0."+strconv.Itoa(i+1), 3)
			if err != nil {
				return started{}, err
			}
			addrs = append(addrs, a...)
		}
		grpcAddrs := make([]string, n)
		var nodes []*proc
		for i := range n {
			a := addrs[3*i : 3*i+3]
			grpcAddrs[i] = a[0]
			env := []string{
				"GUBER_INSTANCE_ID=g" + strconv.Itoa(i),
				"GUBER_GRPC_ADDRESS=" + a[0], "GUBER_ADVERTISE_ADDRESS=" + a[0],
				"GUBER_HTTP_ADDRESS=" + a[1],
				"GUBER_PEER_DISCOVERY_TYPE=member-list",
				// Without a bind address memberlist listens on :7946.
				"GUBER_MEMBERLIST_ADDRESS=" + a[2], "GUBER_MEMBERLIST_BIND_ADDRESS=" + a[2],
				"GUBER_MEMBERLIST_KNOWN_NODES=" + addrs[2],
				"GUBER_LOG_LEVEL=warn",
				// No collector here: otherwise it retries sending traces.
				"OTEL_TRACES_EXPORTER=none",
			}
			p, err := ps.start("gubernator-"+strconv.Itoa(i), b.gubernator, nil, env)
			if err != nil {
				return started{}, err
			}
			nodes = append(nodes, p)
		}
		for i, p := range nodes {
			if err := waitFor(ctx, p, "healthy with all peers", func(ctx context.Context) error {
				return guberHealthy(ctx, grpcAddrs[i], n)
			}); err != nil {
				return started{}, err
			}
		}
		return started{addrs: grpcAddrs}, probe(ctx, nodes, grpcAddrs, func(cc grpc.ClientConnInterface) decider {
			return newGuberDecider(cc, guber.Behavior_BATCHING)
		})
	}
}

func guberHealthy(ctx context.Context, addr string, n int) error {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	resp, err := guber.NewV1Client(cc).HealthCheck(ctx, &guber.HealthCheckReq{})
	if err != nil {
		return err
	}
	if resp.GetStatus() != "healthy" || int(resp.GetPeerCount()) != n {
		return fmt.Errorf("status %q (%s), %d peers, want %d", resp.GetStatus(), resp.GetMessage(), resp.GetPeerCount(), n)
	}
	return nil
}

// ratelimitConfig is the nearest envoyproxy/ratelimit has to 100/s burst
// 10: a fixed window of 100 per second (it has no burst setting).
var ratelimitConfig = fmt.Sprintf(`domain: %s
descriptors:
  - key: %s
    rate_limit:
      unit: second
      requests_per_unit: %d
`, rlsDomain, rlsKey, limitPerSecond)

// startRatelimit starts one redis-server and one envoyproxy/ratelimit on it.
func startRatelimit(ctx context.Context, ps *procs, b binaries) (started, error) {
	cfgDir := filepath.Join(ps.dir, "runtime", "ratelimit", "config")
	if err := os.MkdirAll(cfgDir, 0o700); err != nil {
		return started{}, fmt.Errorf("peers: %w", err)
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "bench.yaml"), []byte(ratelimitConfig), 0o600); err != nil {
		return started{}, fmt.Errorf("peers: %w", err)
	}
	redisAddr, err := startRedis(ctx, ps, "ratelimit-redis")
	if err != nil {
		return started{}, err
	}
	addrs, err := freeAddrs(3) // grpc, http, debug
	if err != nil {
		return started{}, err
	}
	env := []string{
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=" + port(addrs[0]),
		"HOST=127.0.0.1", "PORT=" + port(addrs[1]),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + port(addrs[2]),
		"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + redisAddr,
		"USE_STATSD=false", "LOG_LEVEL=warn",
		"RUNTIME_ROOT=" + filepath.Join(ps.dir, "runtime"), "RUNTIME_SUBDIRECTORY=ratelimit",
		"RUNTIME_WATCH_ROOT=false",
	}
	p, err := ps.start("ratelimit", b.ratelimit, nil, env)
	if err != nil {
		return started{}, err
	}
	st := started{addrs: addrs[:1], redis: redisAddr}
	return st, probe(ctx, []*proc{p}, st.addrs, newRLSDecider)
}

// probe waits until every node answers one decision on a key the workloads
// never use, so a system that listens but cannot decide yet (no policy, no
// Redis connection) is not measured.
func probe(ctx context.Context, nodes []*proc, addrs []string, newDecider func(grpc.ClientConnInterface) decider) error {
	for i, addr := range addrs {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return fmt.Errorf("peers: dial %s: %w", addr, err)
		}
		d := newDecider(cc)
		err = waitFor(ctx, nodes[i], "a decision", func(ctx context.Context) error {
			_, err := d.decide(ctx, "probe-"+strings.ReplaceAll(addr, ":", "-"))
			return err
		})
		cc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
