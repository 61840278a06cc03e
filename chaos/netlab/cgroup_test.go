package netlab

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cgroupOf returns the line of /proc/PID/cgroup that names the CPU
// controller's group of pid ("" when the process is gone).
func cgroupOf(t *testing.T, cc cpuController, pid int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if (cc.v2 && parts[0] == "0") || (!cc.v2 && hasWord(strings.ReplaceAll(parts[1], ",", " "), "cpu")) {
			return parts[2]
		}
	}
	return ""
}

// throttled reads nr_throttled from a cgroup's cpu.stat.
func throttled(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "nr_throttled "); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

func TestProc_Throttle_limitsAndLifts(t *testing.T) {
	t.Parallel()
	l := newLab(t)
	h := addHosts(t, l, "a")[0]
	cc, err := findCPUController()
	if err != nil {
		t.Skip(err)
	}
	p, _ := startHelper(t, h, "spin")
	q, _ := startHelper(t, h, "spin")
	if err := p.Throttle(0, time.Second); err == nil {
		t.Error("Throttle accepted a zero quota")
	}
	if err := p.Throttle(5*time.Millisecond, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cc.labCgroups(l.id), "p"+strconv.Itoa(p.Pid()))
	want := "/" + cgroupParent + "/" + l.ID() + "/p" + strconv.Itoa(p.Pid())
	if got := cgroupOf(t, cc, p.Pid()); !strings.HasSuffix(got, want) {
		t.Fatalf("throttled process is in cgroup %q, want %q", got, want)
	}
	// A spinning process with 10% of a CPU is throttled within a few periods.
	deadline := time.Now().Add(5 * time.Second)
	for throttled(t, dir) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("a spinning process limited to 5ms every 50ms was never throttled")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := p.Unthrottle(); err != nil {
		t.Fatal(err)
	}
	if got := cgroupOf(t, cc, p.Pid()); strings.Contains(got, cgroupParent) {
		t.Errorf("after Unthrottle the process is still in %q", got)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("after Unthrottle %s still exists (%v)", dir, err)
	}
	if err := p.Unthrottle(); err != nil {
		t.Errorf("second Unthrottle: %v", err)
	}

	// Close lifts what is left, and removes the lab's cgroups.
	if err := q.Throttle(time.Millisecond, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cc.labCgroups(l.id)); !os.IsNotExist(err) {
		t.Errorf("after Close %s still exists (%v)", cc.labCgroups(l.id), err)
	}
	if err := q.Throttle(time.Millisecond, 10*time.Millisecond); err == nil {
		t.Error("Throttle on a closed lab succeeded")
	}
}
