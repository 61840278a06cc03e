package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/netutil"
)

// HTTPServerConfig bounds the connections of the HTTP listener: how long a
// client may take to send a request or read the answer, how long an idle
// keep-alive connection stays open, and how many connections are open at
// once. Without them a slow-body or idle client holds its connection (and a
// file descriptor) forever.
type HTTPServerConfig struct {
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included.
	ReadTimeout time.Duration
	// WriteTimeout bounds the time from the end of the request headers to
	// the end of the answer.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that sends no new request.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers.
	MaxHeaderBytes int
	// MaxConns bounds the open connections. Further connections wait in
	// the kernel's accept queue until one closes. Keep it well below the
	// process's file descriptor limit (ulimit -n) so that gRPC, Redis and
	// gossip keep theirs.
	MaxConns int
}

// DefaultHTTPServerConfig returns the defaults: headers in 5 s, the whole
// request in 10 s, the answer in 10 s, idle connections closed after 60 s,
// 64 KiB of headers, 4,096 connections.
func DefaultHTTPServerConfig() HTTPServerConfig {
	return HTTPServerConfig{
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
		MaxConns:          4096,
	}
}

// Validate reports every problem with c. It changes nothing.
func (c HTTPServerConfig) Validate() error {
	var errs []error
	for name, d := range map[string]time.Duration{
		"read header timeout": c.ReadHeaderTimeout, "read timeout": c.ReadTimeout,
		"write timeout": c.WriteTimeout, "idle timeout": c.IdleTimeout,
	} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("server: http %s %v must be positive", name, d))
		}
	}
	if c.MaxHeaderBytes <= 0 {
		errs = append(errs, fmt.Errorf("server: http max header bytes %d must be positive", c.MaxHeaderBytes))
	}
	if c.MaxConns <= 0 {
		errs = append(errs, fmt.Errorf("server: http max conns %d must be positive", c.MaxConns))
	}
	return errors.Join(errs...)
}

// HTTPServer is an http.Server with c's timeouts and a listener wrapper
// that caps connections. It reports open connections in the gauge
// weir_http_open_connections.
type HTTPServer struct {
	*http.Server
	maxConns int
}

// NewHTTPServer returns a server for h with c's timeouts. Serve it with
// (*HTTPServer).Serve so that the connection cap applies. A nil logger
// discards; a nil reg registers nothing. c must pass Validate.
func NewHTTPServer(c HTTPServerConfig, h http.Handler, logger *slog.Logger, reg prometheus.Registerer) (*HTTPServer, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	open := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "weir_http_open_connections",
		Help: "Open HTTP connections; at most the configured cap.",
	})
	if reg != nil {
		if err := reg.Register(open); err != nil {
			return nil, err
		}
	}
	s := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		ReadTimeout:       c.ReadTimeout,
		WriteTimeout:      c.WriteTimeout,
		IdleTimeout:       c.IdleTimeout,
		MaxHeaderBytes:    c.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(orDiscard(logger).Handler(), slog.LevelDebug),
		ConnState: func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				open.Inc()
			case http.StateClosed, http.StateHijacked:
				open.Dec()
			}
		},
	}
	return &HTTPServer{Server: s, maxConns: c.MaxConns}, nil
}

// Serve serves on lis with at most MaxConns connections open at once. It
// returns as http.Server.Serve does.
func (s *HTTPServer) Serve(lis net.Listener) error {
	return s.Server.Serve(netutil.LimitListener(lis, s.maxConns))
}

// ServeTLS is Serve over TLS, as http.Server.ServeTLS (set TLSConfig
// first, or pass the files).
func (s *HTTPServer) ServeTLS(lis net.Listener, certFile, keyFile string) error {
	return s.Server.ServeTLS(netutil.LimitListener(lis, s.maxConns), certFile, keyFile)
}
