package main

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/weirhq/weir/tlsfiles"
)

// tlsStores holds the node's TLS material, each nil when not configured.
type tlsStores struct {
	public *tlsfiles.Store // --tls-cert, --tls-key, --tls-client-ca
	peer   *tlsfiles.Store // --peer-tls-cert, --peer-tls-key, --peer-tls-ca
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
// --peer-tls-* are set.
func (n *node) peerServerOptions() []grpc.ServerOption {
	if n.tls.peer == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(n.tls.peer.ServerConfig(true)))}
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
