package main

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/weirhq/weir/tlsfiles"
)

// tlsStores holds the node's TLS material, each nil when not configured.
type tlsStores struct {
	public *tlsfiles.Store // --tls-cert, --tls-key, --tls-client-ca
	peer   *tlsfiles.Store // --peer-tls-cert, --peer-tls-key, --peer-tls-ca
	admin  *tlsfiles.Store // the peer certificate and key, with --admin-tls-ca
}

// openTLS loads the configured certificates and keeps them reloaded until
// ctx ends.
func (n *node) openTLS(ctx context.Context, cfg config) error {
	if cfg.publicTLS() {
		s, err := tlsfiles.Load(tlsfiles.Config{CertFile: cfg.TLSCert, KeyFile: cfg.TLSKey, CAFile: cfg.TLSClientCA}, n.logger.With("tls", "public"))
		if err != nil {
			return err
		}
		n.tls.public = s
		n.goBackground(func() error { return s.Run(ctx) })
	}
	if cfg.peerTLS() {
		s, err := tlsfiles.Load(tlsfiles.Config{CertFile: cfg.PeerTLSCert, KeyFile: cfg.PeerTLSKey, CAFile: cfg.PeerTLSCA, RequireCA: true}, n.logger.With("tls", "peer"))
		if err != nil {
			return err
		}
		n.tls.peer = s
		n.goBackground(func() error { return s.Run(ctx) })
	}
	if cfg.AdminTLSCA != "" {
		return n.openAdminTLS(ctx, cfg)
	}
	return nil
}

// openAdminTLS loads the admin listener's material: the node's peer
// certificate, and --admin-tls-ca for its clients, which must be apart
// from the peer CA (checked here, at start) so that no operator
// certificate is also a cluster member.
func (n *node) openAdminTLS(ctx context.Context, cfg config) error {
	if err := tlsfiles.CheckSeparateCAs(cfg.AdminTLSCA, cfg.PeerTLSCA); err != nil {
		return fmt.Errorf("--admin-tls-ca must be a CA of its own, apart from --peer-tls-ca, or every operator certificate would be a cluster member: %w", err)
	}
	s, err := tlsfiles.Load(tlsfiles.Config{CertFile: cfg.PeerTLSCert, KeyFile: cfg.PeerTLSKey, CAFile: cfg.AdminTLSCA, RequireCA: true}, n.logger.With("tls", "admin"))
	if err != nil {
		return err
	}
	n.tls.admin = s
	n.goBackground(func() error { return s.Run(ctx) })
	return nil
}

// publicServerOptions secures the public gRPC server when --tls-cert is set,
// with client certificates required when --tls-client-ca is.
func (n *node) publicServerOptions(cfg config) []grpc.ServerOption {
	if n.tls.public == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(n.tls.public.ServerConfig(cfg.TLSClientCA != "")))}
}

// peerServerOptions requires mutual TLS on the peer server when
// --peer-tls-* are set, with a node certificate: one from the peer CA that
// is valid for server authentication too, so that a client-only
// certificate from the same CA (an operator's) is refused.
func (n *node) peerServerOptions() []grpc.ServerOption {
	if n.tls.peer == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(n.tls.peer.NodeServerConfig()))}
}

// peerClientCredentials is what this node dials its peers with: its peer
// certificate, checking theirs against the peer CA; nil (plaintext) without
// peer TLS.
func (n *node) peerClientCredentials(cfg config) credentials.TransportCredentials {
	if n.tls.peer == nil {
		return nil
	}
	return n.tls.peer.ClientCredentials(cfg.PeerTLSServerName)
}

// reportExposure warns about, and exports as weir_insecure_listeners, every
// listener reachable beyond this host without protection because an
// --insecure-* flag allowed it.
func (n *node) reportExposure(cfg config, reg prometheus.Registerer) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "weir_insecure_listeners",
		Help: "1 for a listener reachable beyond this host without authentication or encryption (allowed by an --insecure-* flag), else 0.",
	}, []string{"listener"})
	reg.MustRegister(g)
	peerOpen := !isLoopback(cfg.PeerAddr) && !cfg.peerTLS()
	gossipOpen := cfg.GossipAddr != "" && !isLoopback(cfg.GossipAddr) && !cfg.gossipKeyed()
	for name, open := range map[string]bool{"peer": peerOpen, "gossip": gossipOpen, "admin": cfg.adminExposed()} {
		if open {
			g.WithLabelValues(name).Set(1)
			n.logger.Warn("INSECURE: listener open beyond this host without authentication; anyone who reaches it can spend, lock or reset any key's quota, or read any key's state",
				"listener", name, "peer_addr", cfg.PeerAddr, "gossip_addr", cfg.GossipAddr, "admin_addr", cfg.AdminAddr)
		} else {
			g.WithLabelValues(name).Set(0)
		}
	}
}
