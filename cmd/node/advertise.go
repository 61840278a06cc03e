package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	sockaddr "github.com/hashicorp/go-sockaddr"
)

// A listener bound to every interface (0.0.0.0, [::] or an empty host)
// cannot be given to other nodes or to clients as it is: they would dial
// themselves. The node puts one host of its own in its place in every
// address it hands out (gossip, the peer address others forward to, the
// public gRPC address of the Topology RPC): --advertise-addr's host, else
// a specific --gossip-addr host, else, as memberlist does, the host's first
// private address (go-sockaddr's order: the default route's interface
// first), else the first address its host name resolves to. Loopback,
// unspecified and link-local addresses are never chosen. When no listener
// binds every interface nothing is chosen; when one does and no address
// can be found, a gossiping node refuses to start and names
// --advertise-addr, and a cluster of one names no gRPC address in its
// Topology answer (a client keeps dialing the address it reached it on).

// hostAddrs is where the node learns its own addresses; tests replace it.
type hostAddrs struct {
	private  func() ([]net.IP, error) // private addresses of up interfaces, best first
	hostname func() (string, error)
	lookup   func(host string) ([]net.IP, error)
}

func systemHostAddrs() hostAddrs {
	return hostAddrs{private: privateIPs, hostname: os.Hostname, lookup: net.LookupIP}
}

// privateIPs lists the host's private (RFC 6890, forwardable) addresses of
// interfaces that are up, in go-sockaddr's order, the one memberlist takes
// the first of.
func privateIPs() ([]net.IP, error) {
	ifs, err := sockaddr.GetPrivateInterfaces()
	if err != nil {
		return nil, err
	}
	var out []net.IP
	for _, ifa := range ifs {
		if ip := sockaddr.ToIPAddr(ifa.SockAddr); ip != nil {
			out = append(out, *(*ip).NetIP())
		}
	}
	return out, nil
}

// wildcardHost reports whether a listen address's host binds every
// interface, and whether that is IPv4's 0.0.0.0 (an IPv6 address would not
// reach it).
func wildcardHost(addr string) (wildcard, v4 bool) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, false
	}
	if host == "" {
		return true, false
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsUnspecified() {
		return false, false
	}
	return true, ip.To4() != nil
}

// checkAdvertiseAddr refuses an --advertise-addr other nodes could not
// dial: not IP:port, or a host that binds every interface.
func checkAdvertiseAddr(addr string) error {
	if addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--advertise-addr %q: want IP:port: %w", addr, err)
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return fmt.Errorf("--advertise-addr %q: %q is not an IP address", addr, host)
	}
	if ip.IsUnspecified() {
		return fmt.Errorf("--advertise-addr %q: other nodes cannot dial an unspecified address; give this host's own IP", addr)
	}
	return nil
}

// advertiseHost returns the host that replaces a wildcard host in the
// addresses this node hands out, or "" when no listener of cfg binds every
// interface. See the comment at the top of this file.
func advertiseHost(cfg config, src hostAddrs) (string, error) {
	if cfg.AdvertiseAddr != "" {
		host, _, err := net.SplitHostPort(cfg.AdvertiseAddr)
		return host, err
	}
	if cfg.GossipAddr != "" {
		if wild, _ := wildcardHost(cfg.GossipAddr); !wild {
			host, _, err := net.SplitHostPort(cfg.GossipAddr)
			return host, err
		}
	}
	// Without gossip nobody learns the peer address, and the Topology RPC
	// may name no address for this node (clients keep the one they dial).
	listeners := []struct{ flag, addr string }{{"--grpc-addr", cfg.GRPCAddr}}
	if cfg.GossipAddr != "" {
		listeners = []struct{ flag, addr string }{{"--gossip-addr", cfg.GossipAddr}, {"--peer-addr", cfg.PeerAddr}, {"--grpc-addr", cfg.GRPCAddr}}
	}
	var wild []string
	needV4 := false
	for _, f := range listeners {
		if w, v4 := wildcardHost(f.addr); w {
			wild = append(wild, f.flag+" "+f.addr)
			needV4 = needV4 || v4
		}
	}
	if len(wild) == 0 {
		return "", nil
	}
	host, tried := pickHost(src, needV4)
	if host != "" || cfg.GossipAddr == "" {
		return host, nil
	}
	return "", fmt.Errorf("%s %s every interface, and %s: set --advertise-addr to the IP:port other nodes reach this one on (or bind those flags to that IP)",
		strings.Join(wild, " and "), pluralBind(len(wild)), tried)
}

func pluralBind(n int) string {
	if n == 1 {
		return "binds"
	}
	return "bind"
}

// pickHost returns the first usable private address, else the first usable
// address the host name resolves to, else "" and what it tried.
func pickHost(src hostAddrs, needV4 bool) (string, string) {
	usable := func(ip net.IP) bool {
		return ip != nil && !ip.IsLoopback() && !ip.IsUnspecified() && !ip.IsLinkLocalUnicast() &&
			!ip.IsMulticast() && (!needV4 || ip.To4() != nil)
	}
	family := "address"
	if needV4 {
		family = "IPv4 address"
	}
	var errs []error
	ips, err := src.private()
	if err != nil {
		errs = append(errs, fmt.Errorf("listing interfaces: %w", err))
	}
	for _, ip := range ips {
		if usable(ip) {
			return ip.String(), ""
		}
	}
	tried := "this host has no private " + family
	name, err := src.hostname()
	if err != nil {
		errs = append(errs, fmt.Errorf("reading the host name: %w", err))
	} else if ips, err = src.lookup(name); err != nil {
		errs = append(errs, fmt.Errorf("resolving %q: %w", name, err))
	} else {
		for _, ip := range ips {
			if usable(ip) {
				return ip.String(), ""
			}
		}
		tried += fmt.Sprintf(" and its name %q resolves to none other nodes could reach (%v)", name, ips)
	}
	if err := errors.Join(errs...); err != nil {
		tried += " (" + strings.ReplaceAll(err.Error(), "\n", "; ") + ")"
	}
	return "", tried
}

// advertised is the address other nodes and clients should dial for a
// listener bound at listen: listen itself, or, when it binds every
// interface, host (from advertiseHost) with listen's port.
func advertised(listen, host string) string {
	if w, _ := wildcardHost(listen); !w || host == "" {
		return listen
	}
	_, port, _ := net.SplitHostPort(listen)
	return net.JoinHostPort(host, port)
}

// gossipedGRPC is the public gRPC address to gossip for the Topology RPC:
// grpc, or none when it is loopback while gossip is not (a client on
// another host would dial its own). Routing clients then send this node's
// groups to any node, which forwards them.
func gossipedGRPC(grpc, gossipAdvertise string) string {
	if isLoopback(grpc) && !isLoopback(gossipAdvertise) {
		return ""
	}
	return grpc
}
