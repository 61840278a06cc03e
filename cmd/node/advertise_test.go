package main

import (
	"errors"
	"net"
	"strings"
	"testing"
)

// fakeHost is a hostAddrs with fixed answers; calls counts the lookups.
type fakeHost struct {
	private []string
	name    string
	nameErr error
	lookup  map[string][]string
	calls   int
}

func (f *fakeHost) src() hostAddrs {
	ips := func(ss []string) []net.IP {
		var out []net.IP
		for _, s := range ss {
			out = append(out, net.ParseIP(s))
		}
		return out
	}
	return hostAddrs{
		private:  func() ([]net.IP, error) { f.calls++; return ips(f.private), nil },
		hostname: func() (string, error) { f.calls++; return f.name, f.nameErr },
		lookup: func(h string) ([]net.IP, error) {
			f.calls++
			if a, ok := f.lookup[h]; ok {
				return ips(a), nil
			}
			return nil, errors.New("no such host")
		},
	}
}

func wildcardConfig() config {
	c := config{GRPCAddr: "0.0.0.0:8081", GossipAddr: "0.0.0.0:7946"}
	c.PeerAddr = "0.0.0.0:8091"
	return c
}

func TestAdvertiseHost_explicitOrSpecificGossipWins(t *testing.T) {
	host := &fakeHost{private: []string{"10.1.1.1"}}
	c := wildcardConfig()
	c.AdvertiseAddr = "192.168.7.7:7946"
	if got, err := advertiseHost(c, host.src()); got != "192.168.7.7" || err != nil {
		t.Errorf("with --advertise-addr: %q %v, want 192.168.7.7", got, err)
	}
	c.AdvertiseAddr, c.GossipAddr = "", "10.9.9.9:7946"
	if got, err := advertiseHost(c, host.src()); got != "10.9.9.9" || err != nil {
		t.Errorf("with a specific --gossip-addr: %q %v, want 10.9.9.9", got, err)
	}
	if host.calls != 0 {
		t.Errorf("the host's addresses were looked up %d times, want none", host.calls)
	}
}

func TestAdvertiseHost_noWildcardChoosesNothing(t *testing.T) {
	host := &fakeHost{}
	c := config{GRPCAddr: "127.0.0.1:8081"}
	c.PeerAddr = "127.0.0.1:8091"
	if got, err := advertiseHost(c, host.src()); got != "" || err != nil || host.calls != 0 {
		t.Errorf("loopback listeners: %q %v after %d lookups, want nothing looked up", got, err, host.calls)
	}
}

func TestAdvertiseHost_wildcardTakesFirstUsablePrivateIP(t *testing.T) {
	for _, tc := range []struct {
		name    string
		gossip  string
		private []string
		want    string
	}{
		{"first private", "0.0.0.0:7946", []string{"10.0.0.5", "172.16.0.9"}, "10.0.0.5"},
		{"0.0.0.0 skips IPv6", "0.0.0.0:7946", []string{"fd00::5", "10.0.0.6"}, "10.0.0.6"},
		{"[::] takes IPv6", "[::]:7946", []string{"fd00::5", "10.0.0.6"}, "fd00::5"},
		{"skips loopback and link-local", "[::]:7946", []string{"127.0.0.1", "::1", "fe80::1", "169.254.3.3", "192.168.1.4"}, "192.168.1.4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := config{GossipAddr: tc.gossip, GRPCAddr: "127.0.0.1:8081"}
			c.PeerAddr = "[::]:8091"
			got, err := advertiseHost(c, (&fakeHost{private: tc.private}).src())
			if got != tc.want || err != nil {
				t.Errorf("got %q %v, want %q", got, err, tc.want)
			}
		})
	}
}

func TestAdvertiseHost_noPrivateIPFallsBackToHostName(t *testing.T) {
	host := &fakeHost{name: "weir-1", lookup: map[string][]string{"weir-1": {"127.0.1.1", "203.0.113.8"}}}
	if got, err := advertiseHost(wildcardConfig(), host.src()); got != "203.0.113.8" || err != nil {
		t.Errorf("got %q %v, want the host name's non-loopback address 203.0.113.8", got, err)
	}
}

func TestAdvertiseHost_nothingReachableRefusesNamingTheFlag(t *testing.T) {
	for name, host := range map[string]*fakeHost{
		"name resolves to loopback": {private: []string{"127.0.0.1"}, name: "box", lookup: map[string][]string{"box": {"127.0.1.1"}}},
		"name does not resolve":     {name: "box"},
		"no host name":              {nameErr: errors.New("uname failed")},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := advertiseHost(wildcardConfig(), host.src())
			if err == nil {
				t.Fatalf("chose %q, want an error", got)
			}
			for _, want := range []string{"--advertise-addr", "--gossip-addr 0.0.0.0:7946", "--peer-addr 0.0.0.0:8091", "--grpc-addr 0.0.0.0:8081"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %s", err, want)
				}
			}
		})
	}
}

func TestCheckAdvertiseAddr_refusesWhatNobodyCanDial(t *testing.T) {
	for _, bad := range []string{"0.0.0.0:7946", "[::]:7946", "weir-1:7946", "10.0.0.5"} {
		if err := checkAdvertiseAddr(bad); err == nil || !strings.Contains(err.Error(), "--advertise-addr") {
			t.Errorf("%q: %v, want an error naming --advertise-addr", bad, err)
		}
	}
	for _, good := range []string{"", "10.0.0.5:7946", "[fd00::5]:7946"} {
		if err := checkAdvertiseAddr(good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
}

func TestAdvertised(t *testing.T) {
	for _, tc := range []struct{ listen, host, want string }{
		{"10.0.0.5:8091", "10.0.0.9", "10.0.0.5:8091"}, // a specific listener stays
		{"0.0.0.0:8091", "10.0.0.9", "10.0.0.9:8091"},  // every interface: the advertise host
		{"[::]:8091", "fd00::9", "[fd00::9]:8091"},
		{":8091", "10.0.0.9", "10.0.0.9:8091"},
		{"127.0.0.1:8091", "10.0.0.9", "127.0.0.1:8091"},
		{"0.0.0.0:8091", "", "0.0.0.0:8091"}, // no wildcard was configured
	} {
		if got := advertised(tc.listen, tc.host); got != tc.want {
			t.Errorf("advertised(%q, %q) = %q, want %q", tc.listen, tc.host, got, tc.want)
		}
	}
}

func TestGossipedGRPC_noLoopbackAddressForOtherHosts(t *testing.T) {
	for _, tc := range []struct{ grpc, gossip, want string }{
		{"127.0.0.1:8081", "127.0.0.1:7946", "127.0.0.1:8081"}, // one host: loopback is right
		{"127.0.0.1:8081", "10.0.0.5:7946", ""},                // other hosts would dial themselves
		{"10.0.0.5:8081", "10.0.0.5:7946", "10.0.0.5:8081"},
	} {
		if got := gossipedGRPC(tc.grpc, tc.gossip); got != tc.want {
			t.Errorf("gossipedGRPC(%q, %q) = %q, want %q", tc.grpc, tc.gossip, got, tc.want)
		}
	}
}

func TestAdvertiseHost_clusterOfOneNeverRefuses(t *testing.T) {
	c := config{GRPCAddr: "0.0.0.0:8081"}
	c.PeerAddr = "0.0.0.0:8091" // nobody learns it without gossip
	if got, err := advertiseHost(c, (&fakeHost{name: "box"}).src()); got != "" || err != nil {
		t.Errorf("no reachable address, no gossip: %q %v, want nothing and no error", got, err)
	}
	host := &fakeHost{private: []string{"10.0.0.5"}}
	if got, err := advertiseHost(c, host.src()); got != "10.0.0.5" || err != nil {
		t.Errorf("a private address, no gossip: %q %v, want it for the Topology answer", got, err)
	}
	c.GRPCAddr = "127.0.0.1:8081"
	host.calls = 0
	if got, err := advertiseHost(c, host.src()); got != "" || err != nil || host.calls != 0 {
		t.Errorf("only the peer listener is wildcard, no gossip: %q %v after %d lookups, want nothing looked up", got, err, host.calls)
	}
}
