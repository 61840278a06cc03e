package main

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
	"syscall"
	"time"
)

const (
	// readyTimeout bounds how long one system may take to answer.
	readyTimeout = 60 * time.Second
	// stopTimeout is how long a process gets after SIGTERM before SIGKILL.
	stopTimeout = 5 * time.Second
	pollEvery   = 50 * time.Millisecond
)

// proc is one child process with its output in a log file.
type proc struct {
	name   string
	cmd    *exec.Cmd
	log    string
	exited chan struct{} // closed once cmd.Wait returned
}

// procs is every process one system started; stopAll ends them in reverse
// order. Not safe for concurrent use.
type procs struct {
	dir  string // logs and config files
	list []*proc
}

// start runs bin with args and env (added to a minimal environment: PATH
// and HOME only, so no GUBER_* or WEIR_* of the caller leaks in).
func (ps *procs) start(name, bin string, args, env []string) (*proc, error) {
	logPath := filepath.Join(ps.dir, name+".log")
	out, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("peers: log for %s: %w", name, err)
	}
	defer out.Close() // the child holds its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Dir = ps.dir
	// Should the bench itself be killed, its servers go with it (Linux).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("peers: start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	ps.list = append(ps.list, p)
	return p, nil
}

// pids returns the process id of every process started.
func (ps *procs) pids() []int {
	out := make([]int, len(ps.list))
	for i, p := range ps.list {
		out[i] = p.cmd.Process.Pid
	}
	return out
}

// stopAll sends SIGTERM to every process, newest first, and SIGKILL to any
// still running after stopTimeout; it returns once all have exited.
func (ps *procs) stopAll() {
	for i := len(ps.list) - 1; i >= 0; i-- {
		p := ps.list[i]
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(stopTimeout):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
	ps.list = nil
}

// waitFor polls check until it returns nil, p exits, ctx ends or
// readyTimeout passes; the error then carries the tail of p's log.
func waitFor(ctx context.Context, p *proc, what string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		callCtx, callCancel := context.WithTimeout(ctx, time.Second)
		err := check(callCtx)
		callCancel()
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("peers: %s exited before %s: %w; log: %s", p.name, what, err, logTail(p.log))
		case <-ctx.Done():
			return fmt.Errorf("peers: %s: no %s within %s: %w; log: %s", p.name, what, readyTimeout, err, logTail(p.log))
		case <-tick.C:
		}
	}
}

func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log)"
	}
	const max = 1200
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(bytes.TrimSpace(b))
}

// freeAddr returns a loopback "127.0.0.1:port" that was free a moment ago.
// A process that loses the race for it fails to start, and waitFor reports
// that with its log.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("peers: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// freeAddrs returns n distinct free addresses on 127.0.0.1, all held open
// until each has been picked so that none is handed out twice.
func freeAddrs(n int) ([]string, error) { return freeAddrsOn("127.0.0.1", n) }

// freeAddrsOn is freeAddrs on the loopback address ip.
func freeAddrsOn(ip string, n int) ([]string, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	addrs := make([]string, n)
	for i := range addrs {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			return nil, fmt.Errorf("peers: free port: %w", err)
		}
		ls = append(ls, l)
		addrs[i] = l.Addr().String()
	}
	return addrs, nil
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// startRedis runs a redis-server without persistence on a free port and
// waits until it answers PING.
func startRedis(ctx context.Context, ps *procs, name string) (string, error) {
	addr, err := freeAddr()
	if err != nil {
		return "", err
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("peers: redis-server is not on PATH (apt-get install redis-server): %w", err)
	}
	p, err := ps.start(name, bin, []string{
		"--port", port(addr), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", ps.dir, "--daemonize", "no",
	}, nil)
	if err != nil {
		return "", err
	}
	return addr, waitFor(ctx, p, "PONG", func(context.Context) error { return ping(addr) })
}

// ping sends one inline PING and expects +PONG.
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
	buf := make([]byte, 16)
	n, err := conn.Read(buf)
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(buf[:n], []byte("+PONG")) {
		return errors.New("redis answered " + strconv.Quote(string(buf[:n])))
	}
	return nil
}
