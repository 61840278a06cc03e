package netlab

import (
	"bufio"
	"os"
	"os/exec"
	"testing"
	"time"
)

// The sweep's ownership rules, on a temporary state directory: no root
// needed. pidAlive and the open sequence numbers are the test's.
func TestOwnership_stale(t *testing.T) {
	dir := t.TempDir()
	me := os.Getpid()
	const alive, dead = 1_000_001, 1_000_002 // PIDs the fake pidAlive knows
	o := ownership{
		dir:      dir,
		pidAlive: func(pid int) bool { return pid == alive || pid == me },
		seqOpen:  func(seq int) bool { return seq == 0 },
	}
	// A live run whose PID looks dead here (another PID namespace, say):
	// its lock on the owner file decides.
	live := labID{pid: dead, seq: 0}
	f, err := createOwner(dir, live, "live run")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// A dead run's owner file, unlocked, whose PID now runs something else.
	recycled := labID{pid: alive, seq: 0}
	g, err := createOwner(dir, recycled, "dead run")
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	creating := labID{pid: me, seq: 7}

	for _, tc := range []struct {
		name string
		id   labID
		want bool
	}{
		{"owner file locked by its run", live, false},
		{"owner file unlocked, PID recycled", recycled, true},
		{"no owner file, owner PID alive (a run creating or closing its lab)", labID{pid: alive, seq: 1}, false},
		{"no owner file, owner PID gone", labID{pid: dead, seq: 1}, true},
		{"no owner file, the id being created", creating, true},
		{"no owner file, this process, lab open", labID{pid: me, seq: 0}, false},
		{"no owner file, this process, lab closed", labID{pid: me, seq: 1}, true},
	} {
		if got := o.stale(tc.id, creating); got != tc.want {
			t.Errorf("%s: stale(%s) = %v, want %v", tc.name, tc.id, got, tc.want)
		}
	}
}

// An owner file locked by another process keeps its lab live until that
// process dies, whatever its PID says: the kernel drops the lock then.
func TestOwnership_stale_otherProcess(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(testExe(t), dir)
	cmd.Env = helperEnviron("hold-owner")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	kill := func() {
		if !killed {
			killed = true
			cmd.Process.Kill()
			cmd.Wait()
		}
	}
	t.Cleanup(kill)
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line
	}()
	select {
	case line := <-ready:
		if line != "ready\n" {
			t.Fatalf("helper said %q", line)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("helper never got ready")
	}
	id := labID{pid: cmd.Process.Pid, seq: 0}
	// The PID check would call it dead: only the lock can keep it.
	o := ownership{dir: dir, pidAlive: func(int) bool { return false }, seqOpen: func(int) bool { return false }}
	if o.stale(id, labID{}) {
		t.Fatal("a lab whose owner runs and holds its lock is stale")
	}
	kill()
	if !o.stale(id, labID{}) {
		t.Fatal("a lab whose owner was killed is not stale")
	}
}
