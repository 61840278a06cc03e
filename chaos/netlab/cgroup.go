package netlab

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// cgroupParent is the directory, under the CPU controller's root, that
// holds one directory per lab with CPU limits ("<root>/weir-netlab/<id>").
const cgroupParent = "weir-netlab"

// cpuController is where this machine's CPU controller is mounted and which
// interface it speaks: cgroup v2's cpu.max or v1's CFS quota files.
type cpuController struct {
	root string
	v2   bool
}

// findCPUController reads /proc/self/mountinfo for a cgroup v2 hierarchy
// with the cpu controller enabled, or else a v1 hierarchy mounted with the
// cpu option.
func findCPUController() (cpuController, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return cpuController{}, fmt.Errorf("netlab: %w", err)
	}
	defer f.Close()
	var v1 string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "... mountpoint opts - fstype source superopts"
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 5 || len(tail) < 3 {
			continue
		}
		mnt := fields[4]
		switch tail[0] {
		case "cgroup2":
			if b, err := os.ReadFile(filepath.Join(mnt, "cgroup.controllers")); err == nil &&
				hasWord(string(b), "cpu") {
				return cpuController{root: mnt, v2: true}, nil
			}
		case "cgroup":
			if v1 == "" && hasWord(strings.ReplaceAll(tail[2], ",", " "), "cpu") {
				v1 = mnt
			}
		}
	}
	if v1 != "" {
		return cpuController{root: v1}, nil
	}
	return cpuController{}, fmt.Errorf("%w: no cgroup hierarchy with the cpu controller is mounted", ErrUnsupported)
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

// labCgroups is the directory of a lab's CPU cgroups.
func (c cpuController) labCgroups(id labID) string {
	return filepath.Join(c.root, cgroupParent, id.String())
}

// create makes dir (and its parents) with quota of CPU time every period.
func (c cpuController) create(dir string, quota, period time.Duration) error {
	if c.v2 {
		// Each level must pass the cpu controller down to its children.
		for d := c.root; d != dir; {
			if err := writeFile(filepath.Join(d, "cgroup.subtree_control"), "+cpu"); err != nil {
				return err
			}
			rel, _ := filepath.Rel(d, dir)
			d = filepath.Join(d, strings.Split(rel, string(filepath.Separator))[0])
			if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return fmt.Errorf("netlab: %w", err)
			}
		}
		return writeFile(filepath.Join(dir, "cpu.max"),
			fmt.Sprintf("%d %d", quota.Microseconds(), period.Microseconds()))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("netlab: %w", err)
	}
	if err := writeFile(filepath.Join(dir, "cpu.cfs_period_us"), strconv.FormatInt(period.Microseconds(), 10)); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, "cpu.cfs_quota_us"), strconv.FormatInt(quota.Microseconds(), 10))
}

// remove moves every process of dir and of the directories below it back to
// the root cgroup and removes them, deepest first. A missing dir is fine.
func (c cpuController) remove(dir string) error {
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("netlab: %w", err)
	}
	var errs []error
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := c.release(dirs[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// release moves dir's processes to the root cgroup and removes dir.
func (c cpuController) release(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("netlab: %w", err)
	}
	var errs []error
	for _, pid := range strings.Fields(string(b)) {
		// A process that exits meanwhile is not an error.
		if err := writeFile(filepath.Join(c.root, "cgroup.procs"), pid); err != nil && pidExists(pid) {
			errs = append(errs, err)
		}
	}
	// The kernel may take a moment to drop an exited process from the
	// group; rmdir fails with EBUSY until it has.
	deadline := time.Now().Add(2 * time.Second)
	for {
		err := os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			errs = append(errs, fmt.Errorf("netlab: removing cgroup: %w", err))
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.Join(errs...)
}

func pidExists(pid string) bool {
	_, err := os.Stat(filepath.Join("/proc", pid))
	return err == nil
}

func writeFile(path, s string) error {
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		return fmt.Errorf("netlab: writing %q to %s: %w", s, path, err)
	}
	return nil
}

// Throttle limits the process to quota of CPU time every period (a cgroup
// with cpu.max "quota period" on cgroup v2, or the CFS quota files on v1),
// as a container's CPU limit does: once the process has used its quota it
// is not scheduled again until the period ends. The process's threads and
// any children it starts later are throttled together; children already
// running are not. Unthrottle, or Lab.Close, lifts it. Throttling an
// already throttled process changes its quota.
func (p *Proc) Throttle(quota, period time.Duration) error {
	if quota <= 0 || period <= 0 || quota > period*64 {
		return fmt.Errorf("netlab: throttle quota %s every %s: want both positive, quota at most 64 periods", quota, period)
	}
	l := p.host.lab
	cc, err := l.cpuController()
	if err != nil {
		return err
	}
	dir := filepath.Join(cc.labCgroups(l.id), "p"+strconv.Itoa(p.pid))
	if err := cc.create(dir, quota, period); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited {
		return errors.Join(os.ErrProcessDone, cc.release(dir))
	}
	return writeFile(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(p.pid))
}

// Unthrottle lifts Throttle: the process goes back to the root cgroup and
// its cgroup is removed. Unthrottling a process that is not throttled, or
// has exited, is not an error.
func (p *Proc) Unthrottle() error {
	l := p.host.lab
	cc, err := l.cpuController()
	if err != nil {
		return err
	}
	return cc.release(filepath.Join(cc.labCgroups(l.id), "p"+strconv.Itoa(p.pid)))
}

// cpuController finds the CPU controller once per lab.
func (l *Lab) cpuController() (cpuController, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return cpuController{}, ErrClosed
	}
	if l.cpu == nil {
		cc, err := findCPUController()
		if err != nil {
			return cpuController{}, err
		}
		l.cpu = &cc
	}
	return *l.cpu, nil
}

// destroyCgroups removes id's CPU cgroups, if this machine has a CPU
// controller at all.
func destroyCgroups(id labID) error {
	cc, err := findCPUController()
	if err != nil {
		return nil // nothing can have been created
	}
	return cc.remove(cc.labCgroups(id))
}

// cgroupLabs lists the ids that have CPU cgroups, for the sweep.
func cgroupLabs() []string {
	cc, err := findCPUController()
	if err != nil {
		return nil
	}
	entries, err := os.ReadDir(filepath.Join(cc.root, cgroupParent))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}
