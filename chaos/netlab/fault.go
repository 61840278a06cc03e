package netlab

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The nftables objects every host carries. The input chain drops, without
// any conntrack exception, every packet whose source is in the set, so
// established connections are cut too and the blocked peer sees a black
// hole rather than a refusal.
const (
	faultTable = "weirchaos"
	faultSet   = "blocked"
	faultRules = `table inet weirchaos {
	set blocked {
		type ipv4_addr
	}
	chain input {
		type filter hook input priority filter; policy accept;
		ip saddr @blocked counter drop
	}
}
`
)

// nft runs nft with args inside the host's namespace.
func (h *Host) nft(stdin string, args ...string) error {
	_, err := run(stdin, "ip", append([]string{"netns", "exec", h.ns, "nft"}, args...)...)
	return err
}

func (h *Host) initFaults() error { return h.nft(faultRules, "-f", "-") }

// setElements runs "nft <verb> element inet weirchaos blocked { ips }" in h.
func (h *Host) setElements(verb string, from []*Host) error {
	ips := make([]string, len(from))
	for i, f := range from {
		ips[i] = f.IP()
	}
	return h.nft("", verb, "element", "inet", faultTable, faultSet, "{ "+strings.Join(ips, ", ")+" }")
}

// Block drops, from now on, every packet from from to to; traffic from to to
// from still flows (TCP connections in either direction stall, since they
// need both). The rule sits in to's input chain. Blocking a pair that is
// already blocked does nothing.
func (l *Lab) Block(from, to *Host) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkPair(from, to); err != nil {
		return err
	}
	return l.block(to, []*Host{from})
}

// Unblock undoes Block(from, to). Unblocking a pair that is not blocked does
// nothing.
func (l *Lab) Unblock(from, to *Host) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkPair(from, to); err != nil {
		return err
	}
	if !l.blocked[to][from] {
		return nil
	}
	if err := to.setElements("delete", []*Host{from}); err != nil {
		return err
	}
	delete(l.blocked[to], from)
	return nil
}

// Partition blocks traffic both ways between every host of a and every host
// of b. Traffic within each side is untouched. A host may not be on both
// sides.
func (l *Lab) Partition(a, b []*Host) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	for _, h := range slices.Concat(a, b) {
		if err := l.checkHost(h); err != nil {
			return err
		}
	}
	for _, h := range a {
		if slices.Contains(b, h) {
			return fmt.Errorf("netlab: Partition: host %s is on both sides", h.name)
		}
	}
	var errs []error
	for _, to := range b {
		if err := l.block(to, a); err != nil {
			errs = append(errs, err)
		}
	}
	for _, to := range a {
		if err := l.block(to, b); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Heal removes every fault of every host.
func (l *Lab) Heal() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	var errs []error
	for _, h := range l.hosts {
		// Flush every host, not only those with recorded blocks, so that
		// a half-applied Block cannot survive a Heal.
		if err := h.nft("", "flush", "set", "inet", faultTable, faultSet); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(l.blocked, h)
	}
	return errors.Join(errs...)
}

// block adds the hosts of from that are not blocked yet to to's set. The
// caller holds l.mu and has checked the hosts.
func (l *Lab) block(to *Host, from []*Host) error {
	var add []*Host
	for _, f := range from {
		if !l.blocked[to][f] && !slices.Contains(add, f) {
			add = append(add, f)
		}
	}
	if len(add) == 0 {
		return nil
	}
	if err := to.setElements("add", add); err != nil {
		return err
	}
	if l.blocked[to] == nil {
		l.blocked[to] = map[*Host]bool{}
	}
	for _, f := range add {
		l.blocked[to][f] = true
	}
	return nil
}

// checkPair validates the hosts of a one-way fault. The caller holds l.mu.
func (l *Lab) checkPair(from, to *Host) error {
	if l.closed {
		return ErrClosed
	}
	if err := l.checkHost(from); err != nil {
		return err
	}
	if err := l.checkHost(to); err != nil {
		return err
	}
	if from == to {
		return fmt.Errorf("netlab: cannot block host %s from itself", from.name)
	}
	return nil
}
