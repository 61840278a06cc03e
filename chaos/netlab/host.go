package netlab

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"unsafe"
)

// Host is one machine of the lab: a network namespace with one address.
type Host struct {
	lab  *Lab
	name string
	ns   string
	veth string
	ip   netip.Addr
}

// Name returns the name given to AddHost.
func (h *Host) Name() string { return h.name }

// IP returns the host's IPv4 address.
func (h *Host) IP() string { return h.ip.String() }

// Namespace returns the name of the host's network namespace (as listed by
// "ip netns list").
func (h *Host) Namespace() string { return h.ns }

// Lab returns the lab the host belongs to.
func (h *Host) Lab() *Lab { return h.lab }

// Command returns an exec.Cmd that runs name with args inside the host's
// network namespace, through "ip netns exec", which execs name so that the
// Cmd's process is the program itself. The process gets SIGKILL when the
// thread that starts it dies (Pdeathsig) and leads its own process group.
func (h *Host) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command("ip", append([]string{"netns", "exec", h.ns, name}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
	return cmd
}

// Start starts cmd, which must come from h.Command, and records it so that
// Lab.Close kills it. The process's stdout and stderr are appended to
// logPath; if logPath is empty, cmd's own Stdout and Stderr are used. Start
// waits for the process in the background: use the returned Proc, not
// cmd.Wait.
func (h *Host) Start(cmd *exec.Cmd, logPath string) (*Proc, error) {
	if len(cmd.Args) < 5 || filepath.Base(cmd.Args[0]) != "ip" ||
		cmd.Args[1] != "netns" || cmd.Args[2] != "exec" || cmd.Args[3] != h.ns {
		return nil, fmt.Errorf("netlab: host %s: Start needs a command made by Host.Command, got %q", h.name, cmd.Args)
	}
	if cmd.Process != nil {
		return nil, errors.New("netlab: Start: command already started")
	}
	if logPath != "" {
		if cmd.Stdout != nil || cmd.Stderr != nil {
			return nil, errors.New("netlab: Start: command already has Stdout or Stderr and a log path was given")
		}
		f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("netlab: %w", err)
		}
		defer f.Close() // the child has its own copy
		// An *os.File is handed to the child directly: no copying
		// goroutine, so waiting never blocks on grandchildren that keep the
		// output open.
		cmd.Stdout = f
		cmd.Stderr = f
	}

	l := h.lab
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("netlab: host %s: starting %q: %w", h.name, cmd.Args[4:], err)
	}
	p := &Proc{host: h, cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{})}
	go p.wait()
	// Forget processes that have exited, so a long run's list stays short.
	live := l.procs[:0]
	for _, q := range l.procs {
		select {
		case <-q.done:
		default:
			live = append(live, q)
		}
	}
	clear(l.procs[len(live):])
	l.procs = append(live, p)
	return p, nil
}

// Proc is a process started by Host.Start.
type Proc struct {
	host *Host
	cmd  *exec.Cmd
	pid  int
	done chan struct{}
	err  error // set before done is closed

	// mu orders signals against reaping: the waiter sets exited, under mu,
	// after the process has exited but before it is reaped, so a signal
	// sent under mu with exited false cannot hit a recycled PID.
	mu     sync.Mutex
	exited bool
}

func (p *Proc) wait() {
	if waitExitedNoReap(p.pid) {
		p.mu.Lock()
		p.exited = true
		p.mu.Unlock()
	}
	p.err = p.cmd.Wait()
	p.mu.Lock()
	p.exited = true
	p.mu.Unlock()
	close(p.done)
}

// waitExitedNoReap blocks until the child pid has exited, leaving it a
// zombie (waitid with WNOWAIT), so its PID and process group ID stay
// reserved. It reports false if waitid failed.
func waitExitedNoReap(pid int) bool {
	const pPID = 1     // P_PID
	var info [128]byte // siginfo_t
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if e != syscall.EINTR {
			return e == 0
		}
	}
}

// Pid returns the process ID.
func (p *Proc) Pid() int { return p.pid }

// Host returns the host the process runs in.
func (p *Proc) Host() *Host { return p.host }

// Signal sends sig to the process's group (the process and any children it
// did not move elsewhere), or to the process alone if it leads no group.
// It returns os.ErrProcessDone once the process has exited.
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited {
		return os.ErrProcessDone
	}
	select {
	case <-p.done:
		return os.ErrProcessDone
	default:
	}
	if err := signalGroup(p.pid, sig); err != nil {
		return fmt.Errorf("netlab: signal %v to process %d: %w", sig, p.pid, err)
	}
	return nil
}

// Wait waits for the process to exit and returns what exec.Cmd.Wait
// returned. Every call, from any goroutine, gets the same result.
func (p *Proc) Wait() error {
	<-p.done
	return p.err
}

// Done is closed when the process has exited and been reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Kill sends SIGCONT (in case the process is stopped) and SIGKILL to the
// process group and waits for the process to exit. Killing a process that
// has already exited is not an error.
func (p *Proc) Kill() error {
	if err := p.kill(); err != nil {
		return err
	}
	<-p.done
	return nil
}

func (p *Proc) kill() error {
	_ = p.Signal(syscall.SIGCONT)
	if err := p.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}
