package netlab

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary act as a helper program instead of
// running tests; its value is the helper's mode, os.Args[1:] its arguments.
const helperEnv = "NETLAB_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode, os.Args[1:]))
	}
	code := m.Run()
	if code == 0 && checkPrereqs() == nil {
		// Every lab of this process must be gone.
		if left := leftovers(func(id labID) bool { return id.pid == os.Getpid() }); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "netlab: tests left behind %v\n", left)
			code = 1
		}
	}
	os.Exit(code)
}

// leftovers lists the namespaces, links and state directories whose lab id
// matches.
func leftovers(match func(labID) bool) []string {
	nss, _ := listNetns()
	links, _ := listLinks()
	names := append(append(nss, links...), cgroupLabs()...)
	if entries, err := os.ReadDir(stateDir); err == nil {
		for _, e := range entries {
			names = append(names, e.Name())
		}
	}
	var left []string
	for _, name := range names {
		if id, _, ok := parseName(name); ok && match(id) {
			left = append(left, name)
		}
	}
	return left
}

// runHelper is the helper program's main.
func runHelper(mode string, args []string) int {
	fail := func(err error) int {
		fmt.Println("error:", err)
		return 1
	}
	switch mode {
	case "echo": // echo ADDR: TCP echo server
		ln, err := net.Listen("tcp", args[0])
		if err != nil {
			return fail(err)
		}
		fmt.Println("listening")
		for {
			c, err := ln.Accept()
			if err != nil {
				return fail(err)
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	case "dial": // dial ADDR TIMEOUT: one TCP round trip; prints ok, timeout, refused or error
		d, err := time.ParseDuration(args[1])
		if err != nil {
			return fail(err)
		}
		fmt.Println(roundTrip(args[0], d))
		return 0
	case "udp-sink": // udp-sink ADDR: prints every datagram received
		pc, err := net.ListenPacket("udp", args[0])
		if err != nil {
			return fail(err)
		}
		fmt.Println("ready")
		buf := make([]byte, 1500)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return fail(err)
			}
			fmt.Printf("got %s\n", buf[:n])
		}
	case "udp-send": // udp-send ADDR MSG COUNT
		n, err := strconv.Atoi(args[2])
		if err != nil {
			return fail(err)
		}
		c, err := net.Dial("udp", args[0])
		if err != nil {
			return fail(err)
		}
		for range n {
			c.Write([]byte(args[1]))
			time.Sleep(10 * time.Millisecond)
		}
		return 0
	case "pinger": // pinger ADDR: one TCP connection, a round trip every 50ms; prints ok or fail
		c, err := net.DialTimeout("tcp", args[0], 2*time.Second)
		if err != nil {
			return fail(err)
		}
		r := bufio.NewReader(c)
		for {
			c.SetDeadline(time.Now().Add(250 * time.Millisecond))
			if _, err := io.WriteString(c, "ping\n"); err != nil && !isTimeout(err) {
				return fail(err)
			}
			if _, err := r.ReadString('\n'); err == nil {
				fmt.Println("ok")
			} else if isTimeout(err) {
				fmt.Println("fail")
			} else {
				return fail(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	case "sleep":
		time.Sleep(time.Hour)
		return 0
	case "spin": // burns a CPU until killed
		for {
		}
	case "owner": // a run that gets killed: a lab, a host, two sleeping processes
		l, err := New("stale-owner")
		if err != nil {
			return fail(err)
		}
		h, err := l.AddHost("a")
		if err != nil {
			return fail(err)
		}
		exe, err := os.Executable()
		if err != nil {
			return fail(err)
		}
		var pids []int
		for _, orphan := range []bool{false, true} {
			cmd := h.Command(exe)
			cmd.Env = helperEnviron("sleep")
			if orphan {
				// Survives its parent, like a daemonised grandchild.
				cmd.SysProcAttr.Pdeathsig = 0
			}
			p, err := h.Start(cmd, "")
			if err != nil {
				return fail(err)
			}
			pids = append(pids, p.Pid())
		}
		fmt.Printf("ready %s %s %d %d\n", l.ID(), h.Namespace(), pids[0], pids[1])
		time.Sleep(time.Hour)
		return 0
	case "hold-owner": // hold-owner DIR: an owner file under DIR, locked until killed
		f, err := createOwner(args[0], labID{pid: os.Getpid()}, "held")
		if err != nil {
			return fail(err)
		}
		defer f.Close()
		fmt.Println("ready")
		time.Sleep(time.Hour)
		return 0
	}
	return fail(fmt.Errorf("unknown helper mode %q", mode))
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// roundTrip dials addr, sends a line and reads it back, all within d.
func roundTrip(addr string, d time.Duration) string {
	classify := func(err error) string {
		switch {
		case isTimeout(err):
			return "timeout"
		case errors.Is(err, syscall.ECONNREFUSED):
			return "refused"
		}
		return "error: " + err.Error()
	}
	c, err := net.DialTimeout("tcp", addr, d)
	if err != nil {
		return classify(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(d))
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		return classify(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return classify(err)
	}
	if line != "ping\n" {
		return fmt.Sprintf("error: echo %q", line)
	}
	return "ok"
}

// newLab creates a lab closed at the end of the test. Without root, ip or
// nft the test is skipped, unless CI=true.
func newLab(t *testing.T) *Lab {
	t.Helper()
	l, err := New(t.Name())
	if err != nil {
		if errors.Is(err, ErrUnsupported) && os.Getenv("CI") != "true" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return l
}

func requirePrereqs(t *testing.T) {
	t.Helper()
	if err := checkPrereqs(); err != nil {
		if os.Getenv("CI") != "true" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
}

func addHosts(t *testing.T, l *Lab, names ...string) []*Host {
	t.Helper()
	var hs []*Host
	for _, n := range names {
		h, err := l.AddHost(n)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	return hs
}

func testExe(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// helperEnviron is the environment of a helper process. Under -race, a
// program sleeps for a second before exiting unless told otherwise.
func helperEnviron(mode string) []string {
	return append(os.Environ(), helperEnv+"="+mode, "GORACE=atexit_sleep_ms=0")
}

// helper returns a command running the test binary as helper mode inside h.
func helper(t *testing.T, h *Host, mode string, args ...string) *exec.Cmd {
	cmd := h.Command(testExe(t), args...)
	cmd.Env = helperEnviron(mode)
	return cmd
}

// startHelper starts a helper in h, logging to a file in the test's
// temporary directory, and returns the process and the log's path.
func startHelper(t *testing.T, h *Host, mode string, args ...string) (*Proc, string) {
	t.Helper()
	log := filepath.Join(t.TempDir(), h.Name()+"-"+mode+".log")
	p, err := h.Start(helper(t, h, mode, args...), log)
	if err != nil {
		t.Fatal(err)
	}
	return p, log
}

// dial runs one TCP round trip from h to addr and returns ok, timeout,
// refused or an error description.
func dial(t *testing.T, h *Host, addr string, timeout time.Duration) string {
	t.Helper()
	out, err := helper(t, h, "dial", addr, timeout.String()).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("error: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// dialAll runs dials concurrently; each check is {from, to addr, want}.
type dialCheck struct {
	from *Host
	addr string
	want string
}

func dialAll(t *testing.T, timeout time.Duration, checks ...dialCheck) {
	t.Helper()
	got := make([]string, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Go(func() { got[i] = dial(t, c.from, c.addr, timeout) })
	}
	wg.Wait()
	for i, c := range checks {
		if got[i] != c.want {
			t.Errorf("%s -> %s: got %q, want %q", c.from.Name(), c.addr, got[i], c.want)
		}
	}
}

// waitLog waits until the log at path satisfies ok.
func waitLog(t *testing.T, path string, timeout time.Duration, what string, ok func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		b, _ := os.ReadFile(path)
		if ok(string(b)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: timed out waiting for %s; log:\n%s", path, what, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readLog(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func contains(s string) func(string) bool {
	return func(log string) bool { return strings.Contains(log, s) }
}

// waitListening waits until addr accepts TCP connections from the root
// namespace.
func waitListening(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := roundTrip(addr, 200*time.Millisecond)
		if got == "ok" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered from the root namespace: %s", addr, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestHostsReachEachOther(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	hs := addHosts(t, l, "a", "b")
	a, b := hs[0], hs[1]

	if l.Host("a") != a || l.Host("b") != b || l.Host("c") != nil {
		t.Error("Host lookups are wrong")
	}
	if got := l.Hosts(); len(got) != 2 || got[0] != a || got[1] != b {
		t.Errorf("Hosts() = %v", got)
	}
	if a.IP() == b.IP() || a.IP() == l.ControlIP() {
		t.Errorf("addresses: control %s, a %s, b %s", l.ControlIP(), a.IP(), b.IP())
	}
	if _, err := l.AddHost("a"); err == nil {
		t.Error("AddHost accepted a duplicate name")
	}
	if _, err := l.AddHost("bad/name"); err == nil {
		t.Error("AddHost accepted a name with a slash")
	}

	// A server in a, reached from the root namespace through the bridge
	// and from b across it.
	aAddr := net.JoinHostPort(a.IP(), "7000")
	startHelper(t, a, "echo", aAddr)
	waitListening(t, aAddr)
	dialAll(t, 2*time.Second, dialCheck{b, aAddr, "ok"})

	// A server in the root namespace on ControlIP, reached from a host.
	ln, err := net.Listen("tcp", net.JoinHostPort(l.ControlIP(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	dialAll(t, 2*time.Second, dialCheck{a, ln.Addr().String(), "ok"})

	// Nothing listens on b's port 7000: refused, not a timeout.
	dialAll(t, 2*time.Second, dialCheck{a, net.JoinHostPort(b.IP(), "7000"), "refused"})
}

func TestBlockIsOneWay(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	hs := addHosts(t, l, "a", "b")
	a, b := hs[0], hs[1]

	_, aLog := startHelper(t, a, "udp-sink", net.JoinHostPort(a.IP(), "7001"))
	_, bLog := startHelper(t, b, "udp-sink", net.JoinHostPort(b.IP(), "7001"))
	waitLog(t, aLog, 5*time.Second, "sink ready", contains("ready"))
	waitLog(t, bLog, 5*time.Second, "sink ready", contains("ready"))
	bTCP := net.JoinHostPort(b.IP(), "7000")
	startHelper(t, b, "echo", bTCP)
	waitListening(t, bTCP)

	send := func(from, to *Host, msg string) {
		t.Helper()
		out, err := helper(t, from, "udp-send", net.JoinHostPort(to.IP(), "7001"), msg, "5").CombinedOutput()
		if err != nil {
			t.Fatalf("udp-send: %v: %s", err, out)
		}
	}

	send(a, b, "before-ab")
	send(b, a, "before-ba")
	waitLog(t, bLog, 5*time.Second, "before-ab", contains("got before-ab"))
	waitLog(t, aLog, 5*time.Second, "before-ba", contains("got before-ba"))
	dialAll(t, 2*time.Second, dialCheck{a, bTCP, "ok"})

	if err := l.Block(a, b); err != nil {
		t.Fatal(err)
	}
	if err := l.Block(a, b); err != nil { // already blocked: no-op
		t.Fatal(err)
	}
	if err := l.Block(a, a); err == nil {
		t.Error("Block(a, a) succeeded")
	}
	send(a, b, "during-ab")
	send(b, a, "during-ba")
	// b -> a still flows; once it has arrived, a -> b (sent first) had
	// every chance to arrive too.
	waitLog(t, aLog, 5*time.Second, "during-ba", contains("got during-ba"))
	time.Sleep(100 * time.Millisecond)
	if log := readLog(t, bLog); strings.Contains(log, "during-ab") {
		t.Errorf("b received a's datagrams while a -> b was blocked:\n%s", log)
	}
	// TCP needs both directions; the blocked peer is a black hole (a
	// timeout), not a refusal. The root namespace is not blocked.
	dialAll(t, 500*time.Millisecond, dialCheck{a, bTCP, "timeout"})
	if got := roundTrip(bTCP, 2*time.Second); got != "ok" {
		t.Errorf("root -> b during Block(a, b): %s", got)
	}

	if err := l.Heal(); err != nil {
		t.Fatal(err)
	}
	send(a, b, "after-ab")
	waitLog(t, bLog, 5*time.Second, "after-ab", contains("got after-ab"))
	dialAll(t, 2*time.Second, dialCheck{a, bTCP, "ok"})

	// Unblock undoes a single Block.
	if err := l.Block(b, a); err != nil {
		t.Fatal(err)
	}
	dialAll(t, 500*time.Millisecond, dialCheck{a, bTCP, "timeout"})
	if err := l.Unblock(b, a); err != nil {
		t.Fatal(err)
	}
	dialAll(t, 2*time.Second, dialCheck{a, bTCP, "ok"})
}

func TestPartitionAndHeal(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	hs := addHosts(t, l, "a", "b", "c")
	a, b, c := hs[0], hs[1], hs[2]
	addr := map[*Host]string{}
	for _, h := range hs {
		addr[h] = net.JoinHostPort(h.IP(), "7000")
		startHelper(t, h, "echo", addr[h])
	}
	for _, h := range hs {
		waitListening(t, addr[h])
	}

	// A connection established before the partition.
	_, pingLog := startHelper(t, a, "pinger", addr[b])
	waitLog(t, pingLog, 5*time.Second, "pings", func(s string) bool { return strings.Count(s, "ok") >= 2 })

	if err := l.Partition([]*Host{a}, []*Host{b, c}); err != nil {
		t.Fatal(err)
	}
	if err := l.Partition([]*Host{a}, []*Host{a, b}); err == nil {
		t.Error("Partition accepted a host on both sides")
	}
	dialAll(t, 500*time.Millisecond,
		dialCheck{a, addr[b], "timeout"},
		dialCheck{a, addr[c], "timeout"},
		dialCheck{b, addr[a], "timeout"},
		dialCheck{c, addr[a], "timeout"},
		dialCheck{b, addr[c], "ok"},
		dialCheck{c, addr[b], "ok"},
	)
	// The established connection is cut too.
	waitLog(t, pingLog, 5*time.Second, "a failed ping", contains("fail"))
	// The orchestrator still reaches everyone.
	for _, h := range hs {
		if got := roundTrip(addr[h], 2*time.Second); got != "ok" {
			t.Errorf("root -> %s during partition: %s", h.Name(), got)
		}
	}

	if err := l.Heal(); err != nil {
		t.Fatal(err)
	}
	dialAll(t, 2*time.Second,
		dialCheck{a, addr[b], "ok"},
		dialCheck{a, addr[c], "ok"},
		dialCheck{b, addr[a], "ok"},
		dialCheck{c, addr[a], "ok"},
	)
	// The old connection recovers once TCP retransmits.
	failed := len(readLog(t, pingLog))
	waitLog(t, pingLog, 15*time.Second, "a ping after healing", func(s string) bool {
		return len(s) > failed && strings.Contains(s[failed:], "ok")
	})
}

func TestProcSignals(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	h := addHosts(t, l, "a")[0]
	p, _ := startHelper(t, h, "sleep")

	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Many waiters get the same result.
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = p.Wait() })
	}
	wg.Wait()
	for _, err := range errs {
		if err == nil || err.Error() != errs[0].Error() || !strings.Contains(err.Error(), "terminated") {
			t.Errorf("Wait = %v, want the same SIGTERM exit for every waiter", err)
		}
	}
	if err := p.Signal(syscall.SIGKILL); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("Signal after exit = %v, want os.ErrProcessDone", err)
	}
	if err := p.Kill(); err != nil {
		t.Errorf("Kill after exit = %v", err)
	}

	// Kill works on a stopped process.
	q, _ := startHelper(t, h, "sleep")
	if err := q.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := q.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-q.Done():
	default:
		t.Error("Done not closed after Kill")
	}
	if pidAlive(q.Pid()) {
		t.Errorf("process %d alive after Kill", q.Pid())
	}

	// Start refuses commands that would not run in the host.
	if _, err := h.Start(exec.Command("true"), ""); err == nil {
		t.Error("Start accepted a command not made by Host.Command")
	}
}

func TestCloseRemovesEverything(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	hs := addHosts(t, l, "a", "b")
	var procs []*Proc
	for _, h := range hs {
		p, _ := startHelper(t, h, "sleep")
		procs = append(procs, p)
	}
	if err := procs[0].Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// A process the lab did not start (not recorded): Close must find it
	// in the namespace.
	stray := helper(t, hs[1], "sleep")
	if err := stray.Start(); err != nil {
		t.Fatal(err)
	}
	strayDone := make(chan struct{})
	go func() {
		stray.Wait()
		close(strayDone)
	}()
	if err := l.Block(hs[0], hs[1]); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(func(id labID) bool { return id.String() == l.ID() }); len(left) != 6 {
		// state dir, bridge, 2 veths, 2 namespaces
		t.Errorf("before Close: %v, want 6 resources", left)
	}

	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for _, p := range procs {
		select {
		case <-p.Done():
		default:
			t.Errorf("process %d not done after Close", p.Pid())
		}
	}
	select {
	case <-strayDone:
	case <-time.After(5 * time.Second):
		t.Errorf("unrecorded process %d survived Close", stray.Process.Pid)
	}
	if left := leftovers(func(id labID) bool { return id.String() == l.ID() }); len(left) > 0 {
		t.Errorf("after Close: %v", left)
	}
	out, err := exec.Command("ip", "-o", "link", "show").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), l.ID()) {
		t.Errorf("ip link still shows %s:\n%s", l.ID(), out)
	}
	out, err = exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), l.ID()) {
		t.Errorf("ip netns list still shows %s:\n%s", l.ID(), out)
	}

	if _, err := l.AddHost("c"); !errors.Is(err, ErrClosed) {
		t.Errorf("AddHost after Close = %v, want ErrClosed", err)
	}
	if err := l.Heal(); !errors.Is(err, ErrClosed) {
		t.Errorf("Heal after Close = %v, want ErrClosed", err)
	}
	if _, err := hs[0].Start(hs[0].Command("true"), ""); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close = %v, want ErrClosed", err)
	}
}

func TestFailedAddHostCleansUp(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	addHosts(t, l, "a")
	// Take the name of the next host's veth so that AddHost fails half-way,
	// after creating the namespace.
	veth := l.id.vethName(1)
	if out, err := exec.Command("ip", "link", "add", "name", veth, "type", "bridge").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if _, err := l.AddHost("b"); err == nil || !strings.Contains(err.Error(), "File exists") {
		t.Fatalf("AddHost = %v, want an error with ip's output", err)
	}
	if netnsExists(l.id.netnsName("b")) {
		t.Error("failed AddHost left its namespace")
	}
	if l.Host("b") != nil || len(l.Hosts()) != 1 {
		t.Error("failed AddHost left a host")
	}
	// Its cleanup removed the clashing link (it is named after the lab),
	// so a retry works.
	b := addHosts(t, l, "b")[0]
	if want := l.Hosts()[0].IP(); b.IP() == want {
		t.Errorf("b got a's address %s", want)
	}
}

// otherRun is a lab owned by another process, the test binary in helper
// mode "owner": a host running two sleeping processes, one of which
// survives its owner.
type otherRun struct {
	cmd         *exec.Cmd
	id          string
	pid, orphan int
	killed      bool
}

// startOtherRun starts another run and waits until its lab is up. The run
// is killed at the end of the test if the test has not killed it.
func startOtherRun(t *testing.T) *otherRun {
	t.Helper()
	requirePrereqs(t)
	owner := exec.Command(testExe(t))
	owner.Env = helperEnviron("owner")
	owner.Stderr = os.Stderr
	stdout, err := owner.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	r := &otherRun{cmd: owner}
	t.Cleanup(r.kill)
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(15 * time.Second):
		t.Fatal("owner never got ready")
	}
	var ns string
	if _, err := fmt.Sscanf(line, "ready %s %s %d %d", &r.id, &ns, &r.pid, &r.orphan); err != nil {
		t.Fatalf("owner said %q: %v", line, err)
	}
	return r
}

// kill kills the owner with SIGKILL, leaving its lab behind.
func (r *otherRun) kill() {
	if r.killed {
		return
	}
	r.killed = true
	r.cmd.Process.Signal(syscall.SIGKILL)
	r.cmd.Wait()
}

// resources lists what is left of the run's lab.
func (r *otherRun) resources() []string {
	return leftovers(func(id labID) bool { return id.String() == r.id })
}

func TestStaleLabIsSwept(t *testing.T) {
	// A run that dies with SIGKILL and leaves its lab behind.
	run := startOtherRun(t)
	if left := run.resources(); len(left) != 4 { // state dir, bridge, veth, namespace
		t.Fatalf("owner's lab: %v, want 4 resources", left)
	}
	if !pidAlive(run.orphan) {
		t.Fatal("orphan process not running")
	}
	run.kill()
	if !pidAlive(run.orphan) {
		t.Fatal("orphan process died with its owner; the sweep would have nothing to kill")
	}

	l := newLab(t)
	if left := run.resources(); len(left) > 0 {
		t.Errorf("after New, the dead run's lab is still there: %v", left)
	}
	if pidAlive(run.orphan) {
		t.Errorf("process %d of the dead run survived the sweep", run.orphan)
	}
	if pidAlive(run.pid) {
		t.Errorf("process %d of the dead run survived", run.pid)
	}

	// The new lab works.
	h := addHosts(t, l, "a")[0]
	addr := net.JoinHostPort(h.IP(), "7000")
	startHelper(t, h, "echo", addr)
	waitListening(t, addr)
}

// Two chaos runs on one machine (two checkouts, two test binaries): a lab
// created in one sweeps nothing of the other's while the other runs.
func TestLiveLabOfAnotherRunIsKept(t *testing.T) {
	run := startOtherRun(t)
	before := run.resources()
	if len(before) != 4 {
		t.Fatalf("other run's lab: %v, want 4 resources", before)
	}
	l := newLab(t) // sweeps
	addHosts(t, l, "a")
	if after := run.resources(); !slices.Equal(after, before) {
		t.Errorf("after this run's New, the other run's lab is %v, was %v", after, before)
	}
	for _, pid := range []int{run.pid, run.orphan} {
		if !pidAlive(pid) {
			t.Errorf("process %d of the other run was killed", pid)
		}
	}
	// Once the other run is dead, the next New sweeps its lab.
	run.kill()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	newLab(t)
	if left := run.resources(); len(left) > 0 {
		t.Errorf("after the other run died, its lab is still there: %v", left)
	}
}

func TestConcurrentLabsAreIndependent(t *testing.T) {
	t.Parallel()
	l1 := newLab(t)
	l2 := newLab(t)
	if l1.ID() == l2.ID() || l1.Subnet() == l2.Subnet() {
		t.Fatalf("two open labs share an id or subnet: %s %s, %s %s", l1.ID(), l1.Subnet(), l2.ID(), l2.Subnet())
	}
	h1 := addHosts(t, l1, "a")[0]
	h2 := addHosts(t, l2, "a")[0]
	if err := l1.Block(h1, h2); err == nil {
		t.Error("Block accepted a host of another lab")
	}
	// A third New sweeps, and must leave both open labs alone.
	l3 := newLab(t)
	if err := l3.Close(); err != nil {
		t.Fatal(err)
	}
	for _, h := range []*Host{h1, h2} {
		if !netnsExists(h.Namespace()) {
			t.Errorf("namespace %s of an open lab was swept", h.Namespace())
		}
	}
}
