package redistest

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelOptions shape [StartSentinel]'s deployment.
type SentinelOptions struct {
	// Name is the master's name as the sentinels know it; "" is "weir".
	Name string
	// Replicas of the master (0 means 1) and Sentinels watching it (0
	// means 3; the quorum is a majority of them).
	Replicas, Sentinels int
	// Password is the sentinels' own (requirepass); "" sets none.
	Password string
	// DownAfter is how long the master must not answer before a sentinel
	// thinks it down (down-after-milliseconds); 0 means one second.
	DownAfter time.Duration
}

// SentinelGroup is a master, its replicas and the sentinels that watch
// them, each a process on a free loopback port, all torn down by
// t.Cleanup. Fail over by stopping the master ([Server.Stop]) and wait for
// the sentinels with [SentinelGroup.WaitFailover].
type SentinelGroup struct {
	t         testing.TB
	opts      SentinelOptions
	servers   []*Server // servers[0] is the first master
	sentinels []*sentinel
}

type sentinel struct {
	addr   string
	proc   *process
	client *redis.SentinelClient
}

// StartSentinel starts a master, its replicas (replicating and in sync)
// and sentinels that all know each other and every replica.
func StartSentinel(t testing.TB, o SentinelOptions) *SentinelGroup {
	t.Helper()
	if o.Name == "" {
		o.Name = "weir"
	}
	o.Replicas, o.Sentinels = max(o.Replicas, 1), cmp.Or(o.Sentinels, 3)
	if o.DownAfter <= 0 {
		o.DownAfter = time.Second
	}
	g := &SentinelGroup{t: t, opts: o}
	master := Start(t)
	g.servers = append(g.servers, master)
	host, port, _ := net.SplitHostPort(master.Addr())
	for range o.Replicas {
		g.servers = append(g.servers, Start(t, WithArgs("--replicaof", host, port)))
	}
	t.Cleanup(g.cleanup) // runs before the servers' cleanups: sentinels go first
	for range o.Sentinels {
		g.sentinels = append(g.sentinels, g.startSentinel(master.Addr()))
	}
	g.waitReady()
	return g
}

// startSentinel runs one sentinel watching masterAddr, trying free ports
// until one binds.
func (g *SentinelGroup) startSentinel(masterAddr string) *sentinel {
	g.t.Helper()
	bin := serverBinary(g.t)
	mhost, mport, _ := net.SplitHostPort(masterAddr)
	var lastErr error
	for range portAttempts {
		port, err := freePort(false)
		if err != nil {
			g.t.Fatalf("redistest: %v", err)
		}
		dir := g.t.TempDir()
		conf := []string{
			"port " + strconv.Itoa(port), "bind 127.0.0.1", "daemonize no",
			"dir " + dir, "logfile " + filepath.Join(dir, "sentinel.log"),
			fmt.Sprintf("sentinel monitor %s %s %s %d", g.opts.Name, mhost, mport, g.opts.Sentinels/2+1),
			fmt.Sprintf("sentinel down-after-milliseconds %s %d", g.opts.Name, g.opts.DownAfter.Milliseconds()),
			fmt.Sprintf("sentinel failover-timeout %s %d", g.opts.Name, 10*g.opts.DownAfter.Milliseconds()),
		}
		if g.opts.Password != "" {
			conf = append(conf, "requirepass "+g.opts.Password, "sentinel sentinel-pass "+g.opts.Password)
		}
		path := filepath.Join(dir, "sentinel.conf")
		if err := os.WriteFile(path, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
			g.t.Fatalf("redistest: %v", err)
		}
		cmd := exec.Command(bin, path, "--sentinel")
		if err := cmd.Start(); err != nil {
			g.t.Fatalf("redistest: exec %s: %v", bin, err)
		}
		p := &process{cmd: cmd, exited: make(chan struct{})}
		go func() {
			_ = cmd.Wait()
			close(p.exited)
		}()
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		s := &sentinel{addr: addr, proc: p}
		g.sentinels = append(g.sentinels, s) // so cleanup kills it whatever happens next
		if lastErr = waitPing(func() error { return pingAuth(addr, g.opts.Password) }, p.exited); lastErr == nil {
			g.sentinels = g.sentinels[:len(g.sentinels)-1]
			s.client = redis.NewSentinelClient(&redis.Options{Addr: addr, Password: g.opts.Password, DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second})
			return s
		}
		lastErr = fmt.Errorf("port %d: %w; log: %s", port, lastErr, logTail(filepath.Join(dir, "sentinel.log")))
		g.sentinels = g.sentinels[:len(g.sentinels)-1]
		p.kill()
	}
	g.t.Fatalf("redistest: starting a sentinel: %v", lastErr)
	return nil
}

func pingAuth(addr, password string) error {
	if password == "" {
		return ping(addr)
	}
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := fmt.Fprintf(conn, "AUTH %s\r\nPING\r\n", password); err != nil {
		return err
	}
	r := bufio.NewReader(conn)
	for _, want := range []string{"+OK", "+PONG"} {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if !strings.HasPrefix(line, want) {
			return fmt.Errorf("unexpected reply %q", strings.TrimSpace(line))
		}
	}
	return nil
}

// waitReady waits until every replica is in sync and every sentinel sees
// the other sentinels and all replicas: only then can they fail over.
func (g *SentinelGroup) waitReady() {
	g.t.Helper()
	g.waitFor(30*time.Second, "replicas in sync and sentinels aware of each other", func(ctx context.Context) bool {
		for _, r := range g.servers[1:] {
			info, err := r.Client().Info(ctx, "replication").Result()
			if err != nil || !strings.Contains(info, "master_link_status:up") {
				return false
			}
		}
		for _, s := range g.sentinels {
			m, err := s.client.Master(ctx, g.opts.Name).Result()
			if err != nil || m["num-other-sentinels"] != strconv.Itoa(len(g.sentinels)-1) || m["num-slaves"] != strconv.Itoa(g.opts.Replicas) {
				return false
			}
		}
		return true
	})
}

func (g *SentinelGroup) waitFor(within time.Duration, what string, cond func(ctx context.Context) bool) {
	g.t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		ctx, cancel := ctxTimeout(2 * time.Second)
		ok := cond(ctx)
		cancel()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("redistest: sentinel group: no %s within %s", what, within)
		}
		<-tick.C
	}
}

// Addrs are the sentinels' host:port addresses.
func (g *SentinelGroup) Addrs() []string {
	out := make([]string, len(g.sentinels))
	for i, s := range g.sentinels {
		out[i] = s.addr
	}
	return out
}

// Name is the master's name as the sentinels know it.
func (g *SentinelGroup) Name() string { return g.opts.Name }

// Master is the server the sentinels started with as master. After a
// failover it is whatever it was made (stopped, or a replica).
func (g *SentinelGroup) Master() *Server { return g.servers[0] }

// Server returns the server at addr, or nil.
func (g *SentinelGroup) Server(addr string) *Server {
	for _, s := range g.servers {
		if s.Addr() == addr {
			return s
		}
	}
	return nil
}

// WaitFailover waits until every sentinel names a master other than old
// and that server answers as a master, and returns its address.
func (g *SentinelGroup) WaitFailover(old string, within time.Duration) string {
	g.t.Helper()
	var addr string
	g.waitFor(within, "failover away from "+old, func(ctx context.Context) bool {
		addr = ""
		for _, s := range g.sentinels {
			hp, err := s.client.GetMasterAddrByName(ctx, g.opts.Name).Result()
			if err != nil || len(hp) != 2 {
				return false
			}
			a := net.JoinHostPort(hp[0], hp[1])
			if a == old || (addr != "" && a != addr) {
				return false
			}
			addr = a
		}
		srv := g.Server(addr)
		if srv == nil {
			return false
		}
		info, err := srv.Client().Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, "role:master")
	})
	return addr
}

func (g *SentinelGroup) cleanup() {
	for _, s := range g.sentinels {
		if s.client != nil {
			_ = s.client.Close()
		}
		s.proc.kill()
	}
}
