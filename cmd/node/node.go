package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/weirhq/weir/clientlease"
	"github.com/weirhq/weir/envoyrls"
	"github.com/weirhq/weir/grpclimit"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/membership"
	"github.com/weirhq/weir/owner"
	"github.com/weirhq/weir/peer"
	"github.com/weirhq/weir/policy"
	"github.com/weirhq/weir/redisconn"
	"github.com/weirhq/weir/rlqs"
	"github.com/weirhq/weir/server"
	"github.com/weirhq/weir/shadow"
)

// node is one running weir node: its listeners, servers and background
// loops. start builds it; shutdown stops it.
type node struct {
	logger   *slog.Logger
	grpcLis  net.Listener
	httpLis  net.Listener
	peerLis  net.Listener // the node-to-node plane: weir.peer.v1.Peer only
	admin    adminServer  // --admin-addr: the read-only admin endpoints
	grpc     *grpc.Server
	peerGRPC *grpc.Server
	// drainPeers ends the context the peer server's DecideStreams watch
	// (peer.WithDrain): called just before that server stops gracefully.
	drainPeers context.CancelFunc
	tls        tlsStores
	http       *http.Server
	health     *health.Server
	watcher    *policy.Watcher // nil with the built-in policy
	// policyOwner is the owner a policy reload restarts (restartOwnership);
	// set once the owner exists, read by the watcher's goroutine.
	policyOwner atomic.Pointer[owner.Owner]
	state       *state
	members     *membership.Membership // nil for a cluster of one
	rls         *envoyrls.Service      // Envoy RLS v3 on the public gRPC server
	leasesvc    *clientlease.Service   // weir.v1.Leases on the public gRPC server: clientlease.go
	rlqs        *rlqs.Server           // Envoy RLQS on the public gRPC server: rlqs.go
	shadow      *shadow.Recorder       // shadow would-denies, served on /admin/shadow
	regional    regionWiring           // global limits shared with other regions: region.go
	name        string                 // --node-name
	advHost     string                 // replaces a wildcard listen host in addresses handed out: advertise.go
	closers     []func() error
	sweepers    []func(now int64) int // rested-key sweeps, run every --sweep-interval
	cancel      context.CancelFunc
	bg          sync.WaitGroup
	failed      chan error
	shutOnce    sync.Once
	mu          struct {
		sync.Mutex
		peers map[string]string // member name -> peer address, as last applied
	}

	redisConn *redisconn.Client // nil without Redis; its password is reloaded on SIGHUP
}

func start(ctx context.Context, cfg config, logger *slog.Logger) (*node, error) {
	n := &node{logger: logger, failed: make(chan error, 4)}
	ok := false
	defer func() {
		if !ok {
			n.shutdown(context.Background(), time.Second)
		}
	}()
	bgCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	n.cancel = cancel

	var err error
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	if n.advHost, err = advertiseHost(cfg, systemHostAddrs()); err != nil {
		return nil, err
	}
	n.reportExposure(cfg, reg)
	if err := n.openTLS(bgCtx, cfg); err != nil {
		return nil, err
	}
	policies, err := n.openPolicy(bgCtx, cfg, reg)
	if err != nil {
		return nil, err
	}
	peers, err := n.openPeers(cfg, reg)
	if err != nil {
		return nil, err
	}
	st, err := n.openState(bgCtx, cfg, policies, peers, reg)
	if err != nil {
		return nil, err
	}
	n.state = st
	if l := n.regional.link; l != nil {
		n.goBackground(func() error { return l.Run(bgCtx) })
	}
	if n.shadow, err = shadow.New(shadow.DefaultConfig(), st.now); err != nil {
		return nil, err
	}
	n.name = cfg.NodeName
	lim, err := limiter.New(limiterConfig(cfg.Bounds), policies, st.router, logger, reg, limiter.WithClock(st.now), limiter.WithMembers(st.router.Members), limiter.WithObserver(n.shadow.Observe), regionFallback(n.regional.link))
	if err != nil {
		return nil, err
	}
	n.sweepers = append(n.sweepers, lim.SweepFallback)
	n.goBackground(func() error {
		return sweep(bgCtx, cfg.SweepInterval, func() int64 { return st.now().UnixNano() }, n.sweepers)
	})
	if n.rls, err = envoyrls.New(lim, logger, reg); err != nil {
		return nil, err
	}
	ph, err := n.peerHandler(cfg.Bounds, policies, reg)
	if err != nil {
		return nil, err
	}
	if err := n.listen(cfg); err != nil {
		return nil, err
	}
	if err := n.serve(cfg, lim, ph, reg); err != nil {
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
	w, err := policy.NewWatcher(policy.WatcherConfig{Path: cfg.PolicyPath, Debounce: 100 * time.Millisecond,
		Check: n.restartOwnership(cfg.regions.policyCheck(cfg.Region, cfg.NodeName))}, n.logger, reg)
	if err != nil {
		return nil, err
	}
	n.watcher = w
	n.goBackground(func() error { return w.Run(ctx) })
	return w, nil
}

// restartOwnership wraps a policy check so that every policy read, before
// it can serve, restarts the owner's stretch of continuous ownership
// (owner.OwnershipChanging): a new policy may shorten a limit's span or
// turn a strict limit fast, and the load rule (package rested) must not
// judge a key by the new span while Redis holds a TAT written under the old
// one. A refused policy costs only loads. check may be nil.
func (n *node) restartOwnership(check func(*policy.Policy) ([]string, error)) func(*policy.Policy) ([]string, error) {
	return func(p *policy.Policy) ([]string, error) {
		if o := n.policyOwner.Load(); o != nil {
			o.OwnershipChanging()
		}
		if check == nil {
			return nil, nil
		}
		return check(p)
	}
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
	if n.peerLis, err = net.Listen("tcp", cfg.PeerAddr); err != nil {
		return fmt.Errorf("peer listener: %w", err)
	}
	return n.listenAdmin(cfg)
}

// serve starts the public gRPC and HTTP servers and, on its own listener,
// the peer server, answering forwarded work with ph. The peer service is
// never registered on the public server, and the peer server has no
// reflection.
func (n *node) serve(cfg config, lim *limiter.Limiter, ph peer.Handler, reg *prometheus.Registry) error {
	budget, err := newInflightBudget(cfg.Bounds, reg)
	if err != nil {
		return err
	}
	workers := streamWorkerOptions(cfg.GRPCStreamWorkers)
	n.grpc = grpc.NewServer(slices.Concat(n.publicServerOptions(cfg), server.DefaultGRPCConfig().ServerOptions(), workers)...)
	public := grpclimit.Gate(n.grpc, budget, int(maxGRPCMessage()))
	n.health = server.RegisterGRPC(public, lim, n.logger, server.WithTopology(n.topology(lim)))
	n.peerGRPC = grpc.NewServer(slices.Concat(n.peerServerOptions(), peer.DefaultServerConfig().ServerOptions(), workers)...)
	peerGated := grpclimit.Gate(n.peerGRPC, budget, int(maxGRPCMessage()))
	var rh peer.RegionHandler // a nil *regionlink.Link must stay a nil interface
	if n.regional.link != nil {
		rh = n.regional.link
	}
	drain, drainPeers := context.WithCancel(context.Background())
	n.drainPeers = drainPeers
	peer.Register(peerGated, ph, peer.WithRegion(rh), peer.WithDrain(drain)) // node-to-node only, never the public server
	envoyrls.Register(public, n.rls)
	if err := n.serveClientLeases(public, cfg, lim, ph, reg); err != nil { // client leases: clientlease.go
		return err
	}
	if err := n.registerRLQS(public, lim, ph, reg); err != nil { // Envoy RLQS: rlqs.go
		return err
	}
	hcfg := server.DefaultHTTPServerConfig()
	hcfg.MaxConns = cfg.Bounds.HTTPMaxConns
	apiCfg := server.DefaultHTTPConfig()
	apiCfg.InFlight = budget
	hs, err := server.NewHTTPServer(hcfg, server.NewHTTPHandler(apiCfg, lim, reg, n.state.ready, n.logger), n.logger, reg)
	if err != nil {
		return err
	}
	n.http = hs.Server
	serveHTTP := func() error { return hs.Serve(n.httpLis) }
	if n.tls.public != nil {
		n.http.TLSConfig = n.tls.public.ServerConfig(cfg.TLSClientCA != "")
		serveHTTP = func() error { return hs.ServeTLS(n.httpLis, "", "") }
	}
	go func() { n.report(n.grpc.Serve(n.grpcLis), "grpc") }()
	go func() { n.report(serveHTTP(), "http") }()
	go func() { n.report(n.peerGRPC.Serve(n.peerLis), "peer") }()
	if err := n.serveAdmin(lim, reg); err != nil {
		return err
	}
	n.logger.Info("weir node listening", "grpc", n.grpcLis.Addr().String(), "http", n.httpLis.Addr().String(),
		"peer", n.peerLis.Addr().String(), "tls", n.tls.public != nil, "peer_tls", n.tls.peer != nil)
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
		n.shutdownAdmin(ctx)
		n.leasesvc.Shutdown() // lease and RLQS streams never end on their own
		n.rlqs.Shutdown()
		stopGRPC(ctx, n.grpc)
		if n.drainPeers != nil {
			n.drainPeers() // peers' streams never end on their own
		}
		stopGRPC(ctx, n.peerGRPC)
		for _, l := range []net.Listener{n.grpcLis, n.httpLis, n.peerLis} {
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

// stopGRPC lets s's in-flight calls finish until ctx ends, then cuts
// them. A nil s does nothing.
func stopGRPC(ctx context.Context, s *grpc.Server) {
	if s == nil {
		return
	}
	stopped := make(chan struct{})
	go func() { s.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-ctx.Done():
		s.Stop()
	}
}

// grpcAddr and peerAddr are the listeners' addresses as other nodes and
// clients dial them: a wildcard host replaced (advertise.go).
func (n *node) grpcAddr() string { return advertised(n.grpcLis.Addr().String(), n.advHost) }
func (n *node) peerAddr() string { return advertised(n.peerLis.Addr().String(), n.advHost) }
func (n *node) httpAddr() string { return n.httpLis.Addr().String() }
