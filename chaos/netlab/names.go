package netlab

import (
	"fmt"
	"strconv"
	"strings"
)

const (
	// namePrefix starts the name of every namespace, link and state
	// directory a lab creates.
	namePrefix = "wch"
	// maxIfName is the longest Linux interface name (IFNAMSIZ - 1).
	maxIfName = 15
	// maxSeq bounds the per-process lab sequence number so that
	// "<id>h<N>" stays within maxIfName for any PID and host index.
	maxSeq = 99
	// maxHostName bounds host names (they become part of namespace names).
	maxHostName = 32
)

// labID identifies a lab: the PID of the process that owns it and a
// sequence number unique among that process's open labs.
type labID struct {
	pid int
	seq int
}

// String returns the prefix shared by every resource of the lab, e.g.
// "wch1ps3-0".
func (id labID) String() string {
	return namePrefix + strconv.FormatInt(int64(id.pid), 36) + "-" + strconv.Itoa(id.seq)
}

func (id labID) bridgeName() string { return id.String() + "br" }

func (id labID) vethName(index int) string { return id.String() + "h" + strconv.Itoa(index) }

func (id labID) netnsName(host string) string { return id.String() + "-" + host }

// resourceKind tells what a parsed name refers to.
type resourceKind int

const (
	kindDir    resourceKind = iota // "<id>": state directory
	kindBridge                     // "<id>br"
	kindVeth                       // "<id>h<N>"
	kindNetns                      // "<id>-<host>"
)

// parseName parses a name made by labID's methods. It is strict so that
// names which merely start with the prefix are left alone.
func parseName(name string) (labID, resourceKind, bool) {
	rest, ok := strings.CutPrefix(name, namePrefix)
	if !ok {
		return labID{}, 0, false
	}
	pidStr, rest, ok := strings.Cut(rest, "-")
	if !ok || pidStr == "" || len(pidStr) > 6 || !isBase36(pidStr) {
		return labID{}, 0, false
	}
	pid, err := strconv.ParseInt(pidStr, 36, 32)
	if err != nil || pid <= 0 {
		return labID{}, 0, false
	}
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	if n == 0 || n > 2 {
		return labID{}, 0, false
	}
	seq, _ := strconv.Atoi(rest[:n])
	if strconv.Itoa(seq) != rest[:n] { // no leading zeros
		return labID{}, 0, false
	}
	id := labID{pid: int(pid), seq: seq}
	rest = rest[n:]
	switch {
	case rest == "":
		return id, kindDir, true
	case rest == "br":
		return id, kindBridge, true
	case strings.HasPrefix(rest, "h") && isDecimal(rest[1:]):
		return id, kindVeth, true
	case strings.HasPrefix(rest, "-") && validHostName(rest[1:]) == nil:
		return id, kindNetns, true
	}
	return labID{}, 0, false
}

func isBase36(s string) bool {
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'z') {
			return false
		}
	}
	return true
}

func isDecimal(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// validHostName accepts 1 to maxHostName letters, digits, '_', '.' and '-',
// starting with a letter or digit.
func validHostName(name string) error {
	if name == "" || len(name) > maxHostName {
		return fmt.Errorf("netlab: host name %q must be 1 to %d characters", name, maxHostName)
	}
	for i, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case i > 0 && (c == '_' || c == '.' || c == '-'):
		default:
			return fmt.Errorf("netlab: host name %q: only letters, digits, '_', '.' and '-' are allowed, starting with a letter or digit", name)
		}
	}
	return nil
}
