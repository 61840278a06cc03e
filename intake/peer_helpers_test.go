package intake

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/grpclimit/grpclimittest"
	"github.com/weirhq/weir/peer"
)

// The Validator's tests moved here from package peer with it; these
// aliases and helpers keep them as they were written there.
type (
	Item        = decide.Request
	Result      = peer.Result
	Client      = peer.Client
	LeaseAnswer = peer.LeaseAnswer
)

// startServer serves h as the peer service on a free loopback port until
// the test ends, and returns its address.
func startServer(t testing.TB, h peer.Handler) string {
	t.Helper()
	return grpclimittest.Serve(t, nil, func(s *grpc.Server) { peer.Register(s, h) })
}

// newClient returns a peer Client closed when the test ends, and its
// registry.
func newClient(t testing.TB, mutate func(*peer.ClientConfig)) (*peer.Client, *prometheus.Registry) {
	t.Helper()
	cfg := peer.DefaultClientConfig()
	cfg.LocalName = "n1"
	cfg.Timeout = 5 * time.Second
	if mutate != nil {
		mutate(&cfg)
	}
	reg := prometheus.NewRegistry()
	c, err := peer.NewClient(cfg, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, reg
}
