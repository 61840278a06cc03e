package redistest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// startTimeout bounds how long one redis-server may take to answer PING.
	startTimeout = 10 * time.Second
	// portAttempts is how many free ports are tried before giving up; a port
	// found free can be taken by another process before redis-server binds it.
	portAttempts = 10
	// pollInterval is how often readiness conditions are re-checked.
	pollInterval = 10 * time.Millisecond
)

// Option changes how [Start] runs the server.
type Option func(*options)

type options struct {
	args []string
}

// WithArgs appends extra redis-server command-line arguments, for example
// WithArgs("--maxmemory", "10mb").
func WithArgs(args ...string) Option {
	return func(o *options) { o.args = append(o.args, args...) }
}

// Server is one redis-server process owned by a test. Its methods are safe
// for concurrent use; they fail the test (t.Fatal) on errors, so call them
// from the test goroutine.
type Server struct {
	t    testing.TB
	dir  string
	args []string
	port int

	mu     sync.Mutex
	proc   *process // nil after Stop
	client *redis.Client
}

// process is a running redis-server and the channel its exit is reported on.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd.Wait returns
}

// Start runs a fresh redis-server on a free loopback port with persistence
// off and its own temporary directory, and waits until it answers PING. The
// server and the client from [Server.Client] are torn down by t.Cleanup.
//
// If redis-server is not installed the test fails (it is never skipped
// silently) with a hint on how to install it.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	s := &Server{t: t, dir: t.TempDir(), args: o.args}
	t.Cleanup(s.cleanup)
	var lastErr error
	for range portAttempts {
		port, err := freePort(false)
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		if lastErr = s.startOn(port); lastErr == nil {
			return s
		}
	}
	t.Fatalf("redistest: starting redis-server: %v", lastErr)
	return nil
}

// serverBinary returns the path of redis-server or fails the test.
func serverBinary(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redistest: redis-server not found on PATH (%v); these tests run a real Redis. "+
			"Install it with: sudo apt-get update && sudo apt-get install -y redis-server", err)
	}
	return path
}

// startOn launches redis-server on port and waits for PING. On failure the
// process is gone and the error includes the tail of its log.
func (s *Server) startOn(port int) error {
	bin := serverBinary(s.t)
	logPath := filepath.Join(s.dir, "redis.log")
	args := []string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no",
		"--dir", s.dir, "--logfile", logPath, "--daemonize", "no",
	}
	args = append(args, s.args...)
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("exec %s: %w", bin, err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := waitPing(func() error { return ping(addr) }, p.exited); err != nil {
		p.kill()
		return fmt.Errorf("port %d: %w; log: %s", port, err, logTail(logPath))
	}
	s.mu.Lock()
	s.port, s.proc = port, p
	s.mu.Unlock()
	return nil
}

// waitPing polls addr with PING until it answers PONG, the process exits, or
// startTimeout passes.
func waitPing(ping func() error, exited <-chan struct{}) error {
	deadline := time.Now().Add(startTimeout)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		err := ping()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no PONG within %s: %w", startTimeout, err)
		}
		select {
		case <-exited:
			return errors.New("redis-server exited during startup")
		case <-tick.C:
		}
	}
}

// ping sends one inline PING over a raw connection, so readiness checks
// start no client goroutines and hold no pool.
func ping(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	buf := make([]byte, 64)
	n, err := conn.Read(buf)
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(buf[:n], []byte("+PONG")) {
		return fmt.Errorf("unexpected reply %q", buf[:n])
	}
	return nil
}

func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log)"
	}
	const max = 1500
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(bytes.TrimSpace(b))
}

// kill sends SIGKILL (which also ends a SIGSTOPped process) and waits until
// the process has been reaped.
func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

func (p *process) signal(sig syscall.Signal) error {
	return p.cmd.Process.Signal(sig)
}

// Addr is the server's "127.0.0.1:port" address. It stays the same across
// [Server.Restart].
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// Client returns a go-redis client for this server, created on first use and
// closed at cleanup. It has ContextTimeoutEnabled set, so a context deadline
// bounds every call even when the server is paused.
func (s *Server) Client() *redis.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client == nil {
		s.client = redis.NewClient(&redis.Options{
			Addr:                  net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)),
			ContextTimeoutEnabled: true,
			DialTimeout:           time.Second,
			ReadTimeout:           2 * time.Second,
			WriteTimeout:          2 * time.Second,
		})
	}
	return s.client
}

// Pause freezes the server with SIGSTOP: connections stay open but nothing
// is answered, the way a stalled Redis behaves.
func (s *Server) Pause() { s.sendSignal(syscall.SIGSTOP) }

// Resume undoes [Server.Pause] with SIGCONT.
func (s *Server) Resume() { s.sendSignal(syscall.SIGCONT) }

func (s *Server) sendSignal(sig syscall.Signal) {
	s.t.Helper()
	s.mu.Lock()
	p := s.proc
	s.mu.Unlock()
	if p == nil {
		s.t.Fatalf("redistest: signal %v to a stopped server", sig)
	}
	if err := p.signal(sig); err != nil {
		s.t.Fatalf("redistest: signal %v: %v", sig, err)
	}
}

// Stop kills the server (SIGKILL, so no clean shutdown) and waits for it to
// exit. Its data is lost. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.kill()
	}
}

// Restart stops the server if it runs and starts an empty one on the same
// port, waiting until it answers PING.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.mu.Lock()
	port := s.port
	s.mu.Unlock()
	var err error
	for range portAttempts {
		if err = s.startOn(port); err == nil {
			return
		}
	}
	s.t.Fatalf("redistest: restarting redis-server on port %d: %v", port, err)
}

func (s *Server) cleanup() {
	s.mu.Lock()
	c := s.client
	s.client = nil
	s.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
	s.Stop()
}

// freePort returns a loopback TCP port that was free a moment ago. With
// withBus it also requires port+10000 (the Redis Cluster bus port) to be
// free. The caller must tolerate losing the race for it.
func freePort(withBus bool) (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("finding a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		if !withBus {
			l.Close()
			return port, nil
		}
		ok := false
		if port+10000 <= 65535 {
			if bl, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000))); err == nil {
				bl.Close()
				ok = true
			}
		}
		l.Close()
		if ok {
			return port, nil
		}
	}
	return 0, errors.New("no free port pair (port, port+10000) found")
}

// ctxTimeout returns a context bounded by d, for setup commands.
func ctxTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
