package netlab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// commandTimeout bounds every ip/nft invocation; they normally take
// milliseconds.
const commandTimeout = 30 * time.Second

// run runs name args... with stdin (if not empty) and returns its combined
// output. The error names the command and includes the output.
func run(stdin, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	if err != nil {
		msg := strings.TrimSpace(out.String())
		if msg == "" {
			msg = "(no output)"
		}
		return out.String(), fmt.Errorf("netlab: %s %s: %w: %s", name, strings.Join(args, " "), err, msg)
	}
	return out.String(), nil
}

// ip runs the ip command.
func ip(args ...string) (string, error) { return run("", "ip", args...) }

// unsupportedError is a prerequisite failure; it matches ErrUnsupported.
type unsupportedError struct{ msg string }

func (e *unsupportedError) Error() string { return e.msg }

func (e *unsupportedError) Unwrap() error { return ErrUnsupported }

func unsupported(format string, args ...any) error {
	return &unsupportedError{msg: fmt.Sprintf(format, args...)}
}

// checkPrereqs reports, plainly, why netlab cannot run here.
func checkPrereqs() error {
	if uid := os.Geteuid(); uid != 0 {
		return unsupported("netlab: needs root (running as uid %d): network namespaces and nftables rules need CAP_NET_ADMIN", uid)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return unsupported("netlab: %q not found on PATH: install iproute2", "ip")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		return unsupported("netlab: %q not found on PATH: install nftables", "nft")
	}
	caps, err := effectiveCaps()
	if err != nil {
		return unsupported("netlab: cannot read capabilities: %v", err)
	}
	const capSysAdmin, capNetAdmin = 21, 12
	for _, c := range []struct {
		bit  uint
		name string
	}{{capNetAdmin, "CAP_NET_ADMIN"}, {capSysAdmin, "CAP_SYS_ADMIN"}} {
		if caps&(1<<c.bit) == 0 {
			return unsupported("netlab: running as root but without %s (a restricted container?): network namespaces and nftables rules need CAP_NET_ADMIN and CAP_SYS_ADMIN", c.name)
		}
	}
	return nil
}

// effectiveCaps returns the CapEff mask of this process.
func effectiveCaps() (uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, errors.New("no CapEff line in /proc/self/status")
}

// listNetns returns the names of all named network namespaces.
func listNetns() ([]string, error) {
	out, err := ip("netns", "list")
	if err != nil {
		return nil, err
	}
	var names []string
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names, nil
}

// listLinks returns the names of all links in the root namespace.
func listLinks() ([]string, error) {
	out, err := ip("-o", "link", "show")
	if err != nil {
		return nil, err
	}
	var names []string
	for line := range strings.Lines(out) {
		// "7: wch1ps3-0h0@if2: <BROADCAST,...> ..."
		f := strings.SplitN(line, ": ", 3)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSpace(f[1]), "@")
		names = append(names, name)
	}
	return names, nil
}

func netnsExists(name string) bool {
	names, err := listNetns()
	if err != nil {
		return true // cannot tell; assume it is there
	}
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

func linkExists(name string) bool {
	_, err := ip("link", "show", "dev", name)
	return err == nil
}

// deleteLink deletes a root-namespace link; a link that is already gone is
// not an error.
func deleteLink(name string) error {
	if _, err := ip("link", "del", "dev", name); err != nil && linkExists(name) {
		return err
	}
	return nil
}

// deleteNetns deletes a named namespace; one that is already gone is not an
// error.
func deleteNetns(name string) error {
	if _, err := ip("netns", "del", name); err != nil && netnsExists(name) {
		return err
	}
	return nil
}

// netnsPids returns the PIDs of the processes inside a named namespace.
func netnsPids(ns string) ([]int, error) {
	out, err := ip("netns", "pids", ns)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(out) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// killNetns SIGKILLs every process inside ns until none is left or the
// deadline passes. A namespace that does not exist has no processes.
func killNetns(ns string, deadline time.Time) error {
	for {
		pids, err := netnsPids(ns)
		if err != nil {
			if !netnsExists(ns) {
				return nil
			}
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("netlab: processes %v in namespace %s survive SIGKILL", pids, ns)
		}
		for _, pid := range pids {
			if pid == os.Getpid() {
				return fmt.Errorf("netlab: refusing to kill myself: this process is inside namespace %s", ns)
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pidAlive reports whether pid names a process that has not exited; a
// zombie counts as dead.
func pidAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// "pid (comm) S ...": comm may contain anything, so look after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return true
	}
	switch b[i+2] {
	case 'Z', 'X', 'x':
		return false
	}
	return true
}

// usedPrefixes returns every IPv4 prefix configured on an address or a route
// (any table) in the root namespace, except default routes.
func usedPrefixes() ([]netip.Prefix, error) {
	addrs, err := ip("-4", "-o", "addr", "show")
	if err != nil {
		return nil, err
	}
	routes, err := ip("-4", "route", "show", "table", "all")
	if err != nil {
		return nil, err
	}
	return append(parseAddrPrefixes(addrs), parseRoutePrefixes(routes)...), nil
}

// parseAddrPrefixes parses `ip -4 -o addr show` output.
func parseAddrPrefixes(out string) []netip.Prefix {
	var ps []netip.Prefix
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] != "inet" {
				continue
			}
			if p, ok := parsePrefix(f[i+1]); ok {
				ps = append(ps, p)
			}
		}
	}
	return ps
}

// parseRoutePrefixes parses `ip -4 route show table all` output.
func parseRoutePrefixes(out string) []netip.Prefix {
	routeTypes := map[string]bool{
		"unicast": true, "local": true, "broadcast": true, "multicast": true,
		"throw": true, "unreachable": true, "prohibit": true, "blackhole": true,
		"nat": true, "anycast": true,
	}
	var ps []netip.Prefix
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) > 0 && routeTypes[f[0]] {
			f = f[1:]
		}
		if len(f) == 0 || f[0] == "default" {
			continue
		}
		if p, ok := parsePrefix(f[0]); ok && p.Bits() > 0 {
			ps = append(ps, p)
		}
	}
	return ps
}

func parsePrefix(s string) (netip.Prefix, bool) {
	if !strings.Contains(s, "/") {
		s += "/32"
	}
	p, err := netip.ParsePrefix(s)
	if err != nil || !p.Addr().Is4() {
		return netip.Prefix{}, false
	}
	return p.Masked(), true
}
