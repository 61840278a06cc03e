package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/weirhq/weir/client"
	"github.com/weirhq/weir/clientlease"
	"github.com/weirhq/weir/clientlease/clientleasetest"
	"github.com/weirhq/weir/policy"
)

const hotPolicy = `version: lease-test
limits:
  - {name: hot, match: [tenant], rate: 1000/s, burst: 200, lease: {max: 50, ttl: 250ms}}
  - {name: plain, match: [user], rate: 1000/s, burst: 200}
`

func mustPolicy(t testing.TB, yaml string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// leaseClient starts a Node serving pol and a client with default leases
// through it.
func leaseClient(t testing.TB, pol string) (*clientleasetest.Node, *clientleasetest.Server, *client.Client) {
	t.Helper()
	n := clientleasetest.New(mustPolicy(t, pol))
	srv := clientleasetest.Serve(t, n, clientlease.DefaultConfig())
	cfg := client.DefaultConfig()
	cfg.Target = srv.Addr
	lc := client.DefaultLeaseConfig()
	cfg.Leases = &lc
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return n, srv, c
}

// waitFor polls cond until it holds or within passes.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", within, what)
		}
		time.Sleep(time.Millisecond) // polling a condition, not waiting for an outcome
	}
}

func TestClient_Decide_leasedKeyDecidedInProcess(t *testing.T) {
	n, _, c := leaseClient(t, hotPolicy)
	ctx := context.Background()
	desc := map[string]string{"tenant": "acme"}
	var fromLease int
	waitFor(t, 5*time.Second, "no decision from a lease", func() bool {
		resp, err := c.Decide(ctx, desc, 1)
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetFromLease() {
			fromLease++
		}
		return fromLease > 0
	})
	before := n.Decides.Load()
	for range 20 {
		resp, err := c.Decide(ctx, desc, 1)
		if err != nil || !resp.GetAllowed() || !resp.GetFromLease() || len(resp.GetLimits()) != 1 || resp.GetLimits()[0].GetName() != "hot" {
			t.Fatalf("decide: %v %v", resp, err)
		}
	}
	if got := n.Decides.Load() - before; got != 0 {
		t.Fatalf("%d Decide RPCs for 20 leased decisions, want 0", got)
	}
	st := c.LeaseStats()
	t.Logf("%+v", st)
}
