package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/inflight"
	"github.com/weirhq/weir/intake"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/peer"
	"github.com/weirhq/weir/server"
)

// boundsConfig holds the resource bounds set by flag (see
// docs/security.md, "Resource bounds", for every bound and its default).
type boundsConfig struct {
	MaxKeys      int
	PeerMaxSkew  time.Duration
	HTTPMaxConns int
	// MaxInflightBytes bounds the bytes of requests being received at
	// once, node-wide (inflight.Config.MaxBytes).
	MaxInflightBytes int64
}

// addBoundsFlags defines the bounds' flags on fs. The returned function
// applies their WEIR_* environment values (a flag given on the command line
// wins) and checks them; call it after fs.Parse.
func addBoundsFlags(fs *flag.FlagSet, b *boundsConfig, getenv func(string) string) func() error {
	fs.IntVar(&b.MaxKeys, "max-keys", 0, "most keys held in owner memory; rested keys are evicted first, and when all are live new keys fall back by policy (reason memory_full); the same cap bounds the local-fallback state, where a new key finding it full is denied (mode closed); 0 means no cap")
	fs.DurationVar(&b.PeerMaxSkew, "peer-max-skew", intake.DefaultMaxSkew, "forwarded work stamped further than this from this node's clock is refused")
	fs.IntVar(&b.HTTPMaxConns, "http-max-conns", server.DefaultHTTPServerConfig().MaxConns, "most open HTTP connections; keep well below ulimit -n")
	fs.Int64Var(&b.MaxInflightBytes, "max-inflight-bytes", inflight.DefaultConfig().MaxBytes, "most bytes of gRPC and HTTP requests being received at once, node-wide; each gRPC call reserves the largest message its listener reads (16 MiB) until its request is decoded, and a call that finds no room within 5 s is refused (RESOURCE_EXHAUSTED, HTTP 503)")
	names := []string{"max-keys", "peer-max-skew", "http-max-conns", "max-inflight-bytes"}
	return func() error {
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		var errs []error
		for _, name := range names {
			if v := getenv(envName(name)); v != "" && !given[name] {
				if err := fs.Set(name, v); err != nil {
					errs = append(errs, fmt.Errorf("%s=%q: %w", envName(name), v, err))
				}
			}
		}
		if b.MaxKeys < 0 {
			errs = append(errs, fmt.Errorf("--max-keys %d must not be negative", b.MaxKeys))
		}
		if b.PeerMaxSkew <= 0 {
			errs = append(errs, fmt.Errorf("--peer-max-skew %s must be positive", b.PeerMaxSkew))
		}
		if b.MaxInflightBytes < maxGRPCMessage() {
			errs = append(errs, fmt.Errorf("--max-inflight-bytes %d must hold at least one largest gRPC message, %d bytes", b.MaxInflightBytes, maxGRPCMessage()))
		}
		if b.HTTPMaxConns <= 0 {
			errs = append(errs, fmt.Errorf("--http-max-conns %d must be positive", b.HTTPMaxConns))
		}
		return errors.Join(errs...)
	}
}

// maxGRPCMessage is the largest message either gRPC listener reads: what
// each gated call reserves of --max-inflight-bytes.
func maxGRPCMessage() int64 {
	return int64(max(server.DefaultGRPCConfig().MaxRecvMsgBytes, peer.DefaultServerConfig().MaxRecvMsgBytes))
}

// newInflightBudget is the node-wide budget --max-inflight-bytes sets,
// shared by the public and peer gRPC servers and the HTTP API.
func newInflightBudget(b boundsConfig, reg prometheus.Registerer) (*inflight.Budget, error) {
	cfg := inflight.DefaultConfig()
	cfg.MaxBytes = b.MaxInflightBytes
	return inflight.New(cfg, reg)
}

// memstoreConfig is owner memory's configuration with the --max-keys cap.
func memstoreConfig(b boundsConfig) memstore.Config {
	mcfg := memstore.DefaultConfig()
	mcfg.MaxKeys = b.MaxKeys
	return mcfg
}

// limiterConfig is the limiter's configuration with the --max-keys cap on
// its local-fallback state too (on_failure: local keys held while their
// owner or Redis cannot decide), so an outage under a flood of distinct
// keys costs bounded memory.
func limiterConfig(b boundsConfig) limiter.Config {
	lcfg := limiter.DefaultConfig()
	lcfg.FallbackMaxKeys = b.MaxKeys
	return lcfg
}

// registerMemstoreMetrics counts what the --max-keys cap does.
func registerMemstoreMetrics(mem *memstore.Store, reg prometheus.Registerer) {
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "weir_memstore_evicted_total",
			Help: "Rested keys evicted from owner memory to make room under --max-keys.",
		}, func() float64 { return float64(mem.Evicted()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "weir_memstore_full_total",
			Help: "Requests for a new key refused because owner memory held --max-keys live keys (they fell back with reason memory_full).",
		}, func() float64 { return float64(mem.Refused()) }),
	)
}

// peerHandler wraps the owner in the Validator that checks forwarded work
// against this node's clock and policy (and fills each item's limit
// identities from it), and logs its lease grants (grantLog).
func (n *node) peerHandler(b boundsConfig, policies limiter.PolicySource, reg prometheus.Registerer) (peer.Handler, error) {
	vcfg := intake.DefaultValidatorConfig()
	vcfg.MaxSkew = b.PeerMaxSkew
	now := n.state.now
	return intake.NewValidator(vcfg, grantLog{ownerSide{n.state.owner, n.state.grants}, n.logger}, policies, func() int64 { return now().UnixNano() }, reg)
}
