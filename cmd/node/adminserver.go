package main

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/server"
	"github.com/weirhq/weir/tlsfiles"
)

// adminMaxConns bounds the admin listener's connections: it serves
// operators and their scripts, never traffic.
const adminMaxConns = 64

// adminProfileMax is the longest CPU profile or trace the admin listener
// serves (/debug/pprof/profile?seconds=N); its write timeout is a little
// longer.
const adminProfileMax = 60 * time.Second

// adminServer is the read-only admin listener (--admin-addr): /admin/status,
// /admin/shadow, /admin/inspect and Go's profiler (/debug/pprof/), which read other tenants' keys and
// state and so are never served on the public port. With the peer mTLS
// material it is HTTPS and every client must present a certificate from
// --admin-tls-ca, or from the peer CA without it; without the material it
// is plaintext, which security.validate allows only on loopback or with
// --insecure-peer.
type adminServer struct {
	lis  net.Listener       // nil when --admin-addr is empty
	http *server.HTTPServer // nil until serveAdmin
}

// listenAdmin opens the admin listener unless --admin-addr is empty.
func (n *node) listenAdmin(cfg config) error {
	if cfg.AdminAddr == "" {
		return nil
	}
	lis, err := net.Listen("tcp", cfg.AdminAddr)
	if err != nil {
		return fmt.Errorf("admin listener: %w", err)
	}
	n.admin.lis = lis
	return nil
}

// serveAdmin serves the admin endpoints on the admin listener, if open,
// with the public HTTP server's timeouts and at most adminMaxConns
// connections. Its connections are not counted in
// weir_http_open_connections, which is the public listener's.
func (n *node) serveAdmin(lim *limiter.Limiter, reg *prometheus.Registry) error {
	if n.admin.lis == nil {
		return nil
	}
	hcfg := server.DefaultHTTPServerConfig()
	hcfg.MaxConns = adminMaxConns
	hcfg.WriteTimeout = adminProfileMax + 5*time.Second
	hs, err := server.NewHTTPServer(hcfg, n.adminHandler(lim, reg), n.logger.With("listener", "admin"), nil)
	if err != nil {
		return err
	}
	n.admin.http = hs
	serve := func() error { return hs.Serve(n.admin.lis) }
	if store := n.adminTLS(); store != nil {
		hs.TLSConfig = store.ServerConfig(true)
		serve = func() error { return hs.ServeTLS(n.admin.lis, "", "") }
	}
	go func() { n.report(serve(), "admin") }()
	n.logger.Info("admin endpoints listening", "admin", n.admin.lis.Addr().String(), "mtls", n.adminTLS() != nil, "operator_ca", n.tls.admin != nil)
	return nil
}

// adminTLS is the admin listener's TLS material: the peer certificate
// with clients from --admin-tls-ca if given, else from --peer-tls-ca; nil
// without peer TLS.
func (n *node) adminTLS() *tlsfiles.Store {
	if n.tls.admin != nil {
		return n.tls.admin
	}
	return n.tls.peer
}

// shutdownAdmin stops the admin server (or closes its listener if it never
// served) within ctx.
func (n *node) shutdownAdmin(ctx context.Context) {
	if n.admin.http != nil {
		if err := n.admin.http.Shutdown(ctx); err != nil {
			n.logger.Warn("admin shutdown", "err", err)
		}
	}
	if n.admin.lis != nil {
		n.admin.lis.Close()
	}
}

// adminAddr is the admin listener's address, "" when disabled.
func (n *node) adminAddr() string {
	if n.admin.lis == nil {
		return ""
	}
	return n.admin.lis.Addr().String()
}
