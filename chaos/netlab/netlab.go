package netlab

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"
)

// ErrUnsupported is wrapped by the errors New returns when this machine
// cannot run a lab: not Linux root, missing capabilities, or no "ip" or
// "nft" on PATH. Tests use errors.Is(err, ErrUnsupported) to decide to skip.
var ErrUnsupported = errors.New("netlab: unsupported environment")

// ErrClosed is returned by operations on a closed lab.
var ErrClosed = errors.New("netlab: lab is closed")

// maxHosts is how many hosts fit in the /24 (.2 to .254).
const maxHosts = 253

// Lab is a test network: a bridge and a set of hosts attached to it. Its
// methods are safe for concurrent use.
type Lab struct {
	name   string
	id     labID
	subnet netip.Prefix
	bridge string
	owner  *os.File // locked owner file; nil until created

	mu      sync.Mutex
	closed  bool
	hosts   []*Host
	byName  map[string]*Host
	procs   []*Proc
	blocked map[*Host]map[*Host]bool // to -> from -> dropped
	cpu     *cpuController           // found by the first Throttle
}

// New creates an empty lab named name (the name is informational; resources
// are named after the lab's id). It checks the prerequisites, sweeps stale
// labs left by dead processes, picks a free 10.x.y.0/24 and creates the
// bridge.
func New(name string) (_ *Lab, err error) {
	if err := checkPrereqs(); err != nil {
		return nil, err
	}
	seq, err := reserveSeq()
	if err != nil {
		return nil, err
	}
	l := &Lab{
		name:    name,
		id:      labID{pid: os.Getpid(), seq: seq},
		byName:  map[string]*Host{},
		blocked: map[*Host]map[*Host]bool{},
	}
	l.bridge = l.id.bridgeName()
	defer func() {
		if err != nil {
			// Close removes whatever was made and releases seq.
			if cerr := l.Close(); cerr != nil {
				err = errors.Join(err, fmt.Errorf("netlab: cleaning up after failed New: %w", cerr))
			}
		}
	}()

	unlock, err := lockMachine()
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := sweep(l.id); err != nil {
		return nil, fmt.Errorf("netlab: removing stale labs: %w", err)
	}
	if l.owner, err = createOwner(stateDir, l.id, name); err != nil {
		return nil, err
	}
	if l.subnet, err = pickSubnet(l.id); err != nil {
		return nil, err
	}
	a := l.subnet.Addr().As4()
	mac := fmt.Sprintf("02:77:63:%02x:%02x:01", a[1], a[2])
	// A fixed MAC keeps the bridge from taking a port's address (and
	// changing it as hosts come and go, which would stale the hosts' ARP
	// entries for ControlIP).
	if _, err := ip("link", "add", "name", l.bridge, "address", mac, "type", "bridge"); err != nil {
		return nil, err
	}
	if _, err := ip("addr", "add", l.ControlIP()+"/24", "dev", l.bridge); err != nil {
		return nil, err
	}
	if _, err := ip("link", "set", "dev", l.bridge, "up"); err != nil {
		return nil, err
	}
	return l, nil
}

// pickSubnet chooses a 10.x.y.0/24 (x in 100..249) that overlaps no address
// or route of the root namespace, starting from one derived from id.
func pickSubnet(id labID) (netip.Prefix, error) {
	used, err := usedPrefixes()
	if err != nil {
		return netip.Prefix{}, err
	}
	h := fnv.New32a()
	h.Write([]byte(id.String()))
	const n = 150 * 256
	start := int(h.Sum32() % n)
	for i := range n {
		k := (start + i) % n
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(100 + k/256), byte(k % 256), 0}), 24)
		if !slices.ContainsFunc(used, p.Overlaps) {
			return p, nil
		}
	}
	return netip.Prefix{}, errors.New("netlab: no free 10.x.y.0/24 subnet: every candidate overlaps an existing address or route")
}

// Name returns the name given to New.
func (l *Lab) Name() string { return l.name }

// ID returns the prefix of every namespace, link and state directory the lab
// creates, e.g. "wch1ps3-0".
func (l *Lab) ID() string { return l.id.String() }

// Subnet returns the lab's subnet, e.g. "10.123.45.0/24".
func (l *Lab) Subnet() string { return l.subnet.String() }

// ControlIP returns the bridge's address. The root namespace (the
// orchestrator) uses it to reach every host, and hosts can reach services
// the orchestrator listens on at this address.
func (l *Lab) ControlIP() string { return l.subnet.Addr().Next().String() }

// Host returns the host called name, or nil.
func (l *Lab) Host(name string) *Host {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byName[name]
}

// Hosts returns the lab's hosts in the order they were added.
func (l *Lab) Hosts() []*Host {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.hosts)
}

// AddHost creates a host: a network namespace joined to the bridge by a veth
// pair, with the next free address of the subnet on its eth0, lo and eth0
// up, a default route via ControlIP and an empty fault table. On failure it
// removes what it created.
func (l *Lab) AddHost(name string) (_ *Host, err error) {
	if err := validHostName(name); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	if l.byName[name] != nil {
		return nil, fmt.Errorf("netlab: lab %s already has a host %q", l.id, name)
	}
	index := len(l.hosts)
	if index >= maxHosts {
		return nil, fmt.Errorf("netlab: lab %s is full (%d hosts)", l.id, maxHosts)
	}
	addr := l.subnet.Addr()
	for range index + 2 {
		addr = addr.Next()
	}
	h := &Host{
		lab:  l,
		name: name,
		ns:   l.id.netnsName(name),
		veth: l.id.vethName(index),
		ip:   addr,
	}
	if len(h.veth) > maxIfName {
		return nil, fmt.Errorf("netlab: interface name %q is longer than %d bytes", h.veth, maxIfName)
	}

	if _, err := ip("netns", "add", h.ns); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			var errs []error
			if derr := killNetns(h.ns, time.Now().Add(killTimeout)); derr != nil {
				errs = append(errs, derr)
			}
			if derr := deleteLink(h.veth); derr != nil {
				errs = append(errs, derr)
			}
			if derr := deleteNetns(h.ns); derr != nil {
				errs = append(errs, derr)
			}
			if len(errs) > 0 {
				err = errors.Join(err, fmt.Errorf("netlab: cleaning up after failed AddHost: %w", errors.Join(errs...)))
			}
		}
	}()
	steps := [][]string{
		{"link", "add", "name", h.veth, "type", "veth", "peer", "name", "eth0", "netns", h.ns},
		{"link", "set", "dev", h.veth, "master", l.bridge},
		{"link", "set", "dev", h.veth, "up"},
		{"-n", h.ns, "link", "set", "dev", "lo", "up"},
		{"-n", h.ns, "addr", "add", h.ip.String() + "/24", "dev", "eth0"},
		{"-n", h.ns, "link", "set", "dev", "eth0", "up"},
		{"-n", h.ns, "route", "add", "default", "via", l.ControlIP(), "dev", "eth0"},
	}
	for _, args := range steps {
		if _, err := ip(args...); err != nil {
			return nil, err
		}
	}
	if err := h.initFaults(); err != nil {
		return nil, err
	}
	l.hosts = append(l.hosts, h)
	l.byName[name] = h
	return h, nil
}

// Close kills every process the lab started (SIGCONT then SIGKILL, and waits
// for them), then anything else still running in its namespaces, and
// deletes the namespaces, veth pairs, bridge and state directory. It is
// idempotent: later calls return nil. It returns every error it met but
// always tries every step.
func (l *Lab) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	procs := l.procs
	l.procs = nil
	l.mu.Unlock()

	var errs []error
	deadline := time.Now().Add(killTimeout)
	for _, p := range procs {
		p.kill()
	}
	for _, p := range procs {
		select {
		case <-p.done:
		case <-time.After(time.Until(deadline)):
			errs = append(errs, fmt.Errorf("netlab: process %d in %s did not exit after SIGKILL", p.pid, p.host.ns))
		}
	}

	// Remove everything named after the id, including what a failed
	// AddHost may have left behind.
	nss, err := listNetns()
	if err != nil {
		errs = append(errs, err)
	}
	links, err := listLinks()
	if err != nil {
		errs = append(errs, err)
	}
	if err := destroy(l.id, nss, links); err != nil {
		errs = append(errs, err)
	}
	if l.owner != nil {
		l.owner.Close() // releases the owner lock
	}
	// Should anything named after the id be left, the next New sweeps it:
	// the id is no longer open, or it is the one being created.
	releaseSeq(l.id.seq)
	return errors.Join(errs...)
}

// checkHost reports whether h is a host of l.
func (l *Lab) checkHost(h *Host) error {
	if h == nil {
		return errors.New("netlab: nil host")
	}
	if h.lab != l {
		return fmt.Errorf("netlab: host %s is not in lab %s", h.name, l.id)
	}
	return nil
}

// signalGroup sends sig to the process group pid leads, or to pid alone if
// it leads no group.
func signalGroup(pid int, sig syscall.Signal) error {
	err := syscall.Kill(-pid, sig)
	if err == syscall.ESRCH {
		err = syscall.Kill(pid, sig)
	}
	return err
}
