package netlab

import (
	"errors"
	"slices"
	"testing"
)

func TestNames(t *testing.T) {
	for _, id := range []labID{{1, 0}, {4194304, 99}, {60466175, 42}} {
		names := map[string]resourceKind{
			id.String():            kindDir,
			id.bridgeName():        kindBridge,
			id.vethName(0):         kindVeth,
			id.vethName(252):       kindVeth,
			id.netnsName("db-1.x"): kindNetns,
		}
		if n := len(id.vethName(252)); id.pid <= 4194304 && n > maxIfName {
			t.Errorf("%q is %d bytes", id.vethName(252), n)
		}
		for name, kind := range names {
			got, gotKind, ok := parseName(name)
			if !ok || got != id || gotKind != kind {
				t.Errorf("parseName(%q) = %v, %v, %v; want %v, %v", name, got, gotKind, ok, id, kind)
			}
		}
	}
	for _, name := range []string{
		"", "wch", "wchx", "wch-0br", "wchab-br", "wchAB-0br", "wchab-01br", "wchab-123br",
		"wchab-0xy", "wchab-0h", "wchab-0hx", "wchab-0-", "wchab-0-a/b", "eth0", "wch0-0br",
	} {
		if id, kind, ok := parseName(name); ok {
			t.Errorf("parseName(%q) = %v, %v, true; want false", name, id, kind)
		}
	}
	// Sequence numbers 1 and 10 must not be confused.
	if id, _, _ := parseName(labID{5, 10}.bridgeName()); id.seq != 10 {
		t.Errorf("seq = %d", id.seq)
	}
}

func TestValidHostName(t *testing.T) {
	for _, ok := range []string{"a", "db1", "node-1.east_2", "A"} {
		if err := validHostName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "-a", ".a", "a/b", "a b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"} {
		if validHostName(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParsePrefixes(t *testing.T) {
	addrs := `1: lo    inet 127.0.0.1/8 scope host lo\       valid_lft forever preferred_lft forever
4: eth0    inet 192.0.2.2/24 brd 192.0.2.255 scope global eth0\       valid_lft forever preferred_lft forever
`
	routes := `default via 192.0.2.1 dev eth0
10.1.2.0/24 dev br0 proto kernel scope link src 10.1.2.1
blackhole 10.9.0.0/16
local 192.0.2.2 dev eth0 table local proto kernel scope host src 192.0.2.2
broadcast 192.0.2.255 dev eth0 table local proto kernel scope link src 192.0.2.2
`
	got := append(parseAddrPrefixes(addrs), parseRoutePrefixes(routes)...)
	want := []string{"127.0.0.0/8", "192.0.2.0/24", "10.1.2.0/24", "10.9.0.0/16", "192.0.2.2/32", "192.0.2.255/32"}
	var gotS []string
	for _, p := range got {
		gotS = append(gotS, p.String())
	}
	if !slices.Equal(gotS, want) {
		t.Errorf("got %v, want %v", gotS, want)
	}
}

func TestUnsupportedErrorsMatch(t *testing.T) {
	err := unsupported("netlab: needs root (running as uid %d)", 1000)
	if !errors.Is(err, ErrUnsupported) {
		t.Error("errors.Is(err, ErrUnsupported) = false")
	}
	if err.Error() != "netlab: needs root (running as uid 1000)" {
		t.Errorf("message %q", err)
	}
}
