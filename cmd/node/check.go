package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/weirhq/weir/policy"
	"github.com/weirhq/weir/tlsfiles"
)

// check is --check: it validates what the node would read at start (the
// flags, already parsed and validated by parseConfig; the TLS files; the
// gossip keys; the policy; the address it would advertise) and writes a
// short summary to w, without listening, gossiping or dialing Redis. It
// is what an init container or a deploy test runs. src is where the
// node's own addresses come from (systemHostAddrs outside tests). The
// summary names files and addresses, never key material.
func check(cfg config, src hostAddrs, w io.Writer) error {
	var errs []error
	tlsOn, err := checkTLS(cfg)
	if err != nil {
		errs = append(errs, err)
	}
	keys, err := cfg.gossipKeys()
	if err != nil {
		errs = append(errs, err)
	}
	p, err := checkPolicy(cfg.PolicyPath)
	if err != nil {
		errs = append(errs, err)
	}
	host, err := advertiseHost(cfg, src)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Fprintf(w, "node %s: configuration valid (nothing was started)\n", cfg.NodeName)
	fmt.Fprintf(w, "  listeners: grpc %s, http %s, peer %s, admin %s\n",
		cfg.GRPCAddr, cfg.HTTPAddr, cfg.PeerAddr, cmp.Or(cfg.AdminAddr, "off"))
	if host != "" {
		fmt.Fprintf(w, "  advertised: grpc %s, peer %s\n", advertised(cfg.GRPCAddr, host), advertised(cfg.PeerAddr, host))
	}
	if cfg.GossipAddr == "" {
		fmt.Fprintln(w, "  cluster: of one (no --gossip-addr)")
	} else {
		adv := cmp.Or(cfg.AdvertiseAddr, advertised(cfg.GossipAddr, host))
		fmt.Fprintf(w, "  gossip: %s advertised as %s, join [%s], %d key(s); Topology gives clients %s\n", cfg.GossipAddr, adv,
			strings.Join(cfg.Join, " "), len(keys), cmp.Or(gossipedGRPC(advertised(cfg.GRPCAddr, host), adv), "no address for this node (--grpc-addr is loopback)"))
	}
	fmt.Fprintf(w, "  store: %s\n", storeSummary(cfg))
	fmt.Fprintf(w, "  policy: %s, version %s, %d limit(s)\n", cmp.Or(cfg.PolicyPath, "built-in"), p.Version, len(p.Limits))
	fmt.Fprintf(w, "  tls: %s\n", cmp.Or(strings.Join(tlsOn, ", "), "none"))
	return nil
}

func storeSummary(cfg config) string {
	if cfg.redisConfigured() {
		return "redis " + cfg.conn.String() + " (not contacted)" // String hides any password
	}
	return "embedded, in memory"
}

// checkPolicy loads --policy as the node would, or the built-in policy.
func checkPolicy(path string) (*policy.Policy, error) {
	if path == "" {
		return policy.Builtin(), nil
	}
	p, err := policy.LoadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--policy: %w", err)
	}
	return p, nil
}

// checkTLS loads every configured certificate, key and CA once, as
// openTLS does, and names the listeners they secure.
func checkTLS(cfg config) ([]string, error) {
	var on []string
	var errs []error
	load := func(what, flags string, c tlsfiles.Config) {
		if _, err := tlsfiles.Load(c, nil); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", flags, err))
			return
		}
		on = append(on, what)
	}
	if cfg.publicTLS() {
		load("public", "--tls-cert, --tls-key, --tls-client-ca", tlsfiles.Config{CertFile: cfg.TLSCert, KeyFile: cfg.TLSKey, CAFile: cfg.TLSClientCA})
	}
	if cfg.peerTLS() {
		load("peer (mutual)", "--peer-tls-cert, --peer-tls-key, --peer-tls-ca", tlsfiles.Config{CertFile: cfg.PeerTLSCert, KeyFile: cfg.PeerTLSKey, CAFile: cfg.PeerTLSCA, RequireCA: true})
	}
	if cfg.AdminTLSCA != "" {
		if err := tlsfiles.CheckSeparateCAs(cfg.AdminTLSCA, cfg.PeerTLSCA); err != nil {
			errs = append(errs, fmt.Errorf("--admin-tls-ca must be a CA of its own, apart from --peer-tls-ca: %w", err))
		} else {
			load("admin (operator CA)", "--admin-tls-ca", tlsfiles.Config{CertFile: cfg.PeerTLSCert, KeyFile: cfg.PeerTLSKey, CAFile: cfg.AdminTLSCA, RequireCA: true})
		}
	}
	return on, errors.Join(errs...)
}
