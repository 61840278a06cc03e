package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/membership"
	"github.com/weirhq/weir/peer"
	"github.com/weirhq/weir/policy"
	"github.com/weirhq/weir/server"
)

// node is one running weir node: its listeners, servers and background
// loops. start builds it; shutdown stops it.
type node struct {
	logger   *slog.Logger
	grpcLis  net.Listener
	httpLis  net.Listener
	grpc     *grpc.Server
	http     *http.Server
	health   *health.Server
	watcher  *policy.Watcher // nil with the built-in policy
	state    *state
	members  *membership.Membership // nil for a cluster of one
	closers  []func() error
	sweepers []func(now int64) int // rested-key sweeps, run every --sweep-interval
	cancel   context.CancelFunc
	bg       sync.WaitGroup
	failed   chan error
	shutOnce sync.Once
	mu       struct {
		sync.Mutex
		peers map[string]string // member name -> gRPC address, as last applied
	}
}

func start(ctx context.Context, cfg config, logger *slog.Logger) (*node, error) {
	n := &node{logger: logger, failed: make(chan error, 2)}
	ok := false
	defer func() {
		if !ok {
			n.shutdown(context.Background(), time.Second)
		}
	}()
	bgCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	n.cancel = cancel

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	policies, err := n.openPolicy(bgCtx, cfg, reg)
	if err != nil {
		return nil, err
	}
	st, err := n.openState(bgCtx, cfg, reg)
	if err != nil {
		return nil, err
	}
	n.state = st
	lim, err := limiter.New(limiter.DefaultConfig(), policies, st.cluster, logger, reg, limiter.WithClock(st.now))
	if err != nil {
		return nil, err
	}
	n.sweepers = append(n.sweepers, lim.SweepFallback)
	n.goBackground(func() error { return sweep(bgCtx, cfg.SweepInterval, n.sweepers) })
	ph, err := n.peerHandler(cfg.Bounds, policies, reg)
	if err != nil {
		return nil, err
	}
	if err := n.listen(cfg); err != nil {
		return nil, err
	}
	if err := n.serve(lim, ph, cfg.Bounds, reg); err != nil {
		return nil, err
	}
	if err := n.joinCluster(bgCtx, cfg, reg); err != nil {
		return nil, err
	}
	ok = true
	return n, nil
}

// openPolicy loads --policy and watches it, or falls back to the built-in
// example policy.
func (n *node) openPolicy(ctx context.Context, cfg config, reg prometheus.Registerer) (limiter.PolicySource, error) {
	if cfg.PolicyPath == "" {
		p := policy.Builtin()
		n.logger.Info("using the built-in example policy; pass --policy FILE for your own", "version", p.Version, "limits", len(p.Limits))
		return policy.Static(p), nil
	}
	w, err := policy.NewWatcher(policy.WatcherConfig{Path: cfg.PolicyPath, Debounce: 100 * time.Millisecond}, n.logger, reg)
	if err != nil {
		return nil, err
	}
	n.watcher = w
	n.goBackground(func() error { return w.Run(ctx) })
	return w, nil
}

func (n *node) reloadPolicy() {
	if n.watcher == nil {
		n.logger.Info("SIGHUP ignored: the built-in policy has no file to reload")
		return
	}
	if err := n.watcher.Reload(); err != nil {
		n.logger.Warn("policy reload on SIGHUP rejected; the previous policy keeps serving", "err", err)
	}
}

func (n *node) listen(cfg config) error {
	var err error
	if n.grpcLis, err = net.Listen("tcp", cfg.GRPCAddr); err != nil {
		return fmt.Errorf("grpc listener: %w", err)
	}
	if n.httpLis, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		return fmt.Errorf("http listener: %w", err)
	}
	return nil
}

func (n *node) serve(lim *limiter.Limiter, ph peer.Handler, b boundsConfig, reg *prometheus.Registry) error {
	n.grpc = grpc.NewServer(server.DefaultGRPCConfig().ServerOptions()...)
	n.health = server.RegisterGRPC(n.grpc, lim, n.logger)
	peer.Register(n.grpc, ph)
	ready := func() error { return nil }
	hcfg := server.DefaultHTTPServerConfig()
	hcfg.MaxConns = b.HTTPMaxConns
	hs, err := server.NewHTTPServer(hcfg, server.NewHTTPHandler(server.DefaultHTTPConfig(), lim, reg, ready, n.logger), n.logger, reg)
	if err != nil {
		return err
	}
	n.http = hs.Server
	go func() { n.report(n.grpc.Serve(n.grpcLis), "grpc") }()
	go func() { n.report(hs.Serve(n.httpLis), "http") }()
	n.logger.Info("weir node listening", "grpc", n.grpcLis.Addr().String(), "http", n.httpLis.Addr().String())
	return nil
}

// report forwards a server's unexpected exit to run's loop.
func (n *node) report(err error, what string) {
	if err != nil && !errors.Is(err, grpc.ErrServerStopped) && !errors.Is(err, http.ErrServerClosed) {
		n.failed <- fmt.Errorf("%s server: %w", what, err)
	}
}

func (n *node) goBackground(f func() error) {
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		if err := f(); err != nil && !errors.Is(err, context.Canceled) {
			n.logger.Error("background loop stopped", "err", err)
		}
	}()
}

// shutdown stops accepting work, lets in-flight calls finish within
// timeout, then stops background loops and closes stores. Idempotent.
func (n *node) shutdown(ctx context.Context, timeout time.Duration) {
	n.shutOnce.Do(func() {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if n.health != nil {
			n.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
		}
		n.leaveCluster(ctx)
		if n.http != nil {
			if err := n.http.Shutdown(ctx); err != nil {
				n.logger.Warn("http shutdown", "err", err)
			}
		}
		if n.grpc != nil {
			stopped := make(chan struct{})
			go func() { n.grpc.GracefulStop(); close(stopped) }()
			select {
			case <-stopped:
			case <-ctx.Done():
				n.grpc.Stop()
			}
		}
		for _, l := range []net.Listener{n.grpcLis, n.httpLis} {
			if l != nil {
				l.Close()
			}
		}
		if n.cancel != nil {
			n.cancel()
		}
		n.bg.Wait()
		for _, c := range n.closers {
			if err := c(); err != nil {
				n.logger.Warn("close", "err", err)
			}
		}
	})
}

func (n *node) grpcAddr() string { return n.grpcLis.Addr().String() }
func (n *node) httpAddr() string { return n.httpLis.Addr().String() }
