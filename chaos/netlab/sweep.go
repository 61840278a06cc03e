package netlab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"
)

// stateDir holds one directory per open lab and serves as the machine-wide
// lock that serialises sweeping and subnet allocation.
const stateDir = "/run/weir-netlab"

// killTimeout bounds how long cleanup waits for killed processes to go.
const killTimeout = 10 * time.Second

// open lab sequence numbers of this process.
var (
	seqMu   sync.Mutex
	seqOpen = map[int]bool{}
)

func reserveSeq() (int, error) {
	seqMu.Lock()
	defer seqMu.Unlock()
	for seq := 0; seq <= maxSeq; seq++ {
		if !seqOpen[seq] {
			seqOpen[seq] = true
			return seq, nil
		}
	}
	return 0, fmt.Errorf("netlab: this process already has %d open labs", maxSeq+1)
}

func releaseSeq(seq int) {
	seqMu.Lock()
	defer seqMu.Unlock()
	delete(seqOpen, seq)
}

func seqIsOpen(seq int) bool {
	seqMu.Lock()
	defer seqMu.Unlock()
	return seqOpen[seq]
}

// lockMachine takes the machine-wide netlab lock (an flock on stateDir) and
// returns the function that releases it.
func lockMachine() (func(), error) {
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return nil, fmt.Errorf("netlab: %w", err)
	}
	f, err := os.Open(stateDir)
	if err != nil {
		return nil, fmt.Errorf("netlab: %w", err)
	}
	if err := flock(f, syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("netlab: locking %s: %w", stateDir, err)
	}
	return func() { f.Close() }, nil // closing releases the lock
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}

func labDir(id labID) string { return filepath.Join(stateDir, id.String()) }

// ownerFile is the owner file of lab id under the state directory dir.
func ownerFile(dir string, id labID) string { return filepath.Join(dir, id.String(), "owner") }

// createOwner creates the lab's state directory under dir and its owner
// file, locked; the lock is held as long as the returned file stays open.
func createOwner(dir string, id labID, name string) (*os.File, error) {
	if err := os.Mkdir(filepath.Join(dir, id.String()), 0o755); err != nil {
		return nil, fmt.Errorf("netlab: %w", err)
	}
	f, err := os.OpenFile(ownerFile(dir, id), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("netlab: %w", err)
	}
	if err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("netlab: locking %s: %w", f.Name(), err)
	}
	fmt.Fprintf(f, "pid %d\nlab %q\ncreated %s\n", id.pid, name, time.Now().Format(time.RFC3339))
	return f, nil
}

// stale reports whether the lab id has no live owner. creating is the id
// that the caller is about to create: anything already named after it is a
// leftover of an earlier process that had the same PID.
func stale(id, creating labID) bool {
	return ownership{dir: stateDir, pidAlive: pidAlive, seqOpen: seqIsOpen}.stale(id, creating)
}

// ownership decides whose labs are live. It reads owner files under dir and
// asks pidAlive and seqOpen (this process's open sequence numbers) only
// when there is no owner file, so tests run it without root on a temporary
// directory.
type ownership struct {
	dir      string
	pidAlive func(pid int) bool
	seqOpen  func(seq int) bool
}

// stale: a live owner holds the lock on its owner file, so when that file
// exists its lock decides, which also catches recycled PIDs. Without it (a
// lab that is half created or half closed) the owner's PID decides: a lab
// of another live process, of whatever checkout, is never stale.
func (o ownership) stale(id, creating labID) bool {
	if free, known := o.ownerLockFree(id); known {
		return free
	}
	if id == creating {
		return true
	}
	if id.pid == os.Getpid() {
		return !o.seqOpen(id.seq)
	}
	return !o.pidAlive(id.pid)
}

// ownerLockFree reports whether the lock on id's owner file is free; known
// is false if there is no owner file.
func (o ownership) ownerLockFree(id labID) (free, known bool) {
	f, err := os.Open(ownerFile(o.dir, id))
	if err != nil {
		return false, false
	}
	defer f.Close() // releases the lock if we got it
	return flock(f, syscall.LOCK_EX|syscall.LOCK_NB) == nil, true
}

// sweep removes every lab whose owner is gone. The caller holds the machine
// lock.
func sweep(creating labID) error {
	nss, err := listNetns()
	if err != nil {
		return err
	}
	links, err := listLinks()
	if err != nil {
		return err
	}
	names := append(slices.Clone(nss), links...)
	if entries, err := os.ReadDir(stateDir); err == nil {
		for _, e := range entries {
			names = append(names, e.Name())
		}
	}
	names = append(names, cgroupLabs()...)
	var ids []labID
	for _, name := range names {
		if id, _, ok := parseName(name); ok && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	var errs []error
	for _, id := range ids {
		if !stale(id, creating) {
			continue
		}
		if err := destroy(id, nss, links); err != nil {
			errs = append(errs, fmt.Errorf("stale lab %s (owner pid %d is gone): %w", id, id.pid, err))
		}
	}
	return errors.Join(errs...)
}

// destroy removes every resource named after id among the given namespaces
// and links: it kills the processes inside the namespaces, deletes the veth
// pairs, the bridge and the namespaces, removes the CPU cgroups and the
// state directory.
func destroy(id labID, nss, links []string) error {
	var errs []error
	deadline := time.Now().Add(killTimeout)
	var mine []string
	for _, ns := range nss {
		if got, kind, ok := parseName(ns); ok && got == id && kind == kindNetns {
			mine = append(mine, ns)
			if err := killNetns(ns, deadline); err != nil {
				errs = append(errs, err)
			}
		}
	}
	// Veths first (deleting one end deletes its peer in the namespace),
	// then the bridge.
	for _, want := range []resourceKind{kindVeth, kindBridge} {
		for _, link := range links {
			if got, kind, ok := parseName(link); ok && got == id && kind == want {
				if err := deleteLink(link); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	for _, ns := range mine {
		if err := deleteNetns(ns); err != nil {
			errs = append(errs, err)
		}
	}
	if err := destroyCgroups(id); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(labDir(id)); err != nil {
		errs = append(errs, fmt.Errorf("netlab: %w", err))
	}
	return errors.Join(errs...)
}
