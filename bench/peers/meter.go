package main

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the unit of utime and stime in /proc/<pid>/stat:
// sysconf(_SC_CLK_TCK), which is 100 on every Linux the kernel's user ABI
// supports (USER_HZ is fixed at 100 for user space). Go's standard library
// has no sysconf, and this value is what glibc returns.
const clockTicks = 100

// tickDuration is one clock tick.
const tickDuration = time.Second / clockTicks

// meter reads what a system's servers spent: the CPU time of every server
// process (utime + stime from /proc, all threads) and, when the system has
// a Redis, the commands it ran (INFO commandstats). Not safe for concurrent
// use: begin and end are called in turn, by one run.
type meter struct {
	pids  []int
	redis string // host:port; empty: the system has no Redis

	from, to reading
	begun    bool
	err      error
}

// reading is one snapshot of a system's servers.
type reading struct {
	ticks int64            // utime + stime of every process, clock ticks
	cmds  map[string]int64 // Redis calls by command, INFO excluded; nil without Redis
}

// begin takes the window's first reading; end the last. An error is kept
// and reported by usage.
func (m *meter) begin() { m.from, m.err = m.read(); m.begun = m.err == nil }
func (m *meter) end() {
	if !m.begun {
		return
	}
	m.to, m.err = m.read()
}

func (m *meter) read() (reading, error) {
	var r reading
	for _, pid := range m.pids {
		t, err := processTicks(pid)
		if err != nil {
			return r, err
		}
		r.ticks += t
	}
	if m.redis != "" {
		cmds, err := redisCommandstats(m.redis)
		if err != nil {
			return r, err
		}
		r.cmds = cmds
	}
	return r, nil
}

// usage is what the servers spent between begin and end.
type usage struct {
	cpu  time.Duration    // server CPU time over the window
	cmds map[string]int64 // Redis calls by command over the window; nil without Redis
}

// usage returns what was spent between begin and end, or the first error.
func (m *meter) usage() (usage, error) {
	switch {
	case m.err != nil:
		return usage{}, m.err
	case !m.begun:
		return usage{}, errors.New("peers: meter: the measured window never began")
	}
	u := usage{cpu: time.Duration(m.to.ticks-m.from.ticks) * tickDuration}
	if m.to.cmds != nil {
		u.cmds = diffCounts(m.from.cmds, m.to.cmds)
	}
	return u, nil
}

// processTicks returns utime + stime of process pid, all its threads, in
// clock ticks.
func processTicks(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("peers: cpu of %d: %w", pid, err)
	}
	return parseStatTicks(b)
}

// parseStatTicks returns utime + stime (fields 14 and 15) of a
// /proc/<pid>/stat line. The second field, the command in parentheses, may
// hold spaces and parentheses itself, so fields are counted from the last
// ')'.
func parseStatTicks(stat []byte) (int64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("peers: /proc stat: no ')' after the command")
	}
	// After ") ": field 3 (state) is rest[0], so field n is rest[n-3].
	rest := strings.Fields(string(stat[i+1:]))
	if len(rest) < 13 {
		return 0, fmt.Errorf("peers: /proc stat: %d fields after the command, want at least 13", len(rest))
	}
	var sum int64
	for _, f := range rest[14-3 : 15-3+1] {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("peers: /proc stat: utime/stime %q is not a tick count", f)
		}
		sum += v
	}
	return sum, nil
}

// redisCommandstats asks the Redis at addr for INFO commandstats and
// returns the calls of every command but INFO (the meter's own).
func redisCommandstats(addr string) (map[string]int64, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, fmt.Errorf("peers: redis %s: %w", addr, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(conn, "INFO commandstats\r\n"); err != nil {
		return nil, fmt.Errorf("peers: redis %s: %w", addr, err)
	}
	body, err := readBulk(bufio.NewReader(conn))
	if err != nil {
		return nil, fmt.Errorf("peers: redis %s: INFO: %w", addr, err)
	}
	return parseCommandstats(body)
}

// maxBulk bounds the INFO reply read (commandstats is a few kilobytes).
const maxBulk = 1 << 20

// readBulk reads one RESP bulk string ("$<n>\r\n<n bytes>\r\n").
func readBulk(r *bufio.Reader) (string, error) {
	head, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	head = strings.TrimRight(head, "\r\n")
	if !strings.HasPrefix(head, "$") {
		return "", fmt.Errorf("reply %q is not a bulk string", head)
	}
	n, err := strconv.Atoi(head[1:])
	if err != nil || n < 0 || n > maxBulk {
		return "", fmt.Errorf("bulk length %q out of range", head[1:])
	}
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(r, buf); err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// parseCommandstats reads INFO commandstats text: one line per command,
// "cmdstat_<name>:calls=<n>,usec=...". It returns calls by name, leaving
// out info (the meter's own calls). Lines that are not cmdstat_ lines
// (the "# Commandstats" header, blanks) are skipped; a cmdstat_ line
// without a valid calls= figure is an error.
func parseCommandstats(text string) (map[string]int64, error) {
	out := make(map[string]int64)
	for line := range strings.Lines(text) {
		stat, isStat := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_")
		if !isStat {
			continue
		}
		name, fields, ok := strings.Cut(stat, ":")
		if !ok || name == "" {
			return nil, fmt.Errorf("peers: commandstats line %q: no name", line)
		}
		calls, err := callsField(fields)
		if err != nil {
			return nil, fmt.Errorf("peers: commandstats line %q: %w", line, err)
		}
		if name != "info" {
			out[name] = calls
		}
	}
	return out, nil
}

func callsField(fields string) (int64, error) {
	for f := range strings.SplitSeq(fields, ",") {
		if v, ok := strings.CutPrefix(f, "calls="); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return 0, fmt.Errorf("calls %q is not a count", v)
			}
			return n, nil
		}
	}
	return 0, errors.New("no calls= field")
}

// diffCounts returns to − from per name, leaving out names whose count did
// not grow.
func diffCounts(from, to map[string]int64) map[string]int64 {
	out := make(map[string]int64)
	for name, n := range to {
		if d := n - from[name]; d > 0 {
			out[name] = d
		}
	}
	return out
}

// total is the sum of counts.
func total(counts map[string]int64) int64 {
	var n int64
	for _, c := range counts {
		n += c
	}
	return n
}

// topCounts renders the k largest counts as "name n, name n", largest
// first (ties by name).
func topCounts(counts map[string]int64, k int) string {
	names := slices.Sorted(maps.Keys(counts))
	slices.SortStableFunc(names, func(a, b string) int { return cmp.Compare(counts[b], counts[a]) })
	var parts []string
	for _, n := range names[:min(k, len(names))] {
		parts = append(parts, fmt.Sprintf("%s %d", n, counts[n]))
	}
	return strings.Join(parts, ", ")
}
