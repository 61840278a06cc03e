package client_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/client"
	"github.com/weirhq/weir/clientlease"
	"github.com/weirhq/weir/clientlease/clientleasetest"
	"github.com/weirhq/weir/lease"
	"github.com/weirhq/weir/policy"
	"github.com/weirhq/weir/server/servertest"
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
	srv := clientleasetest.Serve(t, n, clientlease.DefaultConfig(), nil)
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
	// Until a lease holds units for the 20 decisions below (a leased
	// answer's remaining is the units still held), so that none of them
	// waits for a refresh.
	waitFor(t, 5*time.Second, "no lease of 20 units", func() bool {
		resp, err := c.Decide(ctx, desc, 1)
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetFromLease() && resp.GetRemaining() >= 20
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

func TestClient_Decide_notLeasableGoesOverDecide(t *testing.T) {
	n, _, c := leaseClient(t, hotPolicy)
	desc := map[string]string{"user": "u1"}
	for range 50 {
		resp, err := c.Decide(context.Background(), desc, 1)
		if err != nil || resp.GetFromLease() {
			t.Fatalf("decide: %v %v", resp, err)
		}
	}
	if got := n.Decides.Load(); got != 50 {
		t.Fatalf("%d Decide RPCs for 50 decisions of a limit without lease terms, want 50", got)
	}
}

// warm decides desc until one decision comes from a lease.
func warm(t testing.TB, c *client.Client, desc map[string]string) {
	t.Helper()
	waitFor(t, 5*time.Second, "no decision from a lease", func() bool {
		resp, err := c.Decide(context.Background(), desc, 1)
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetFromLease()
	})
}

func TestClient_Shutdown_returnsUnspentUnits(t *testing.T) {
	n, _, c := leaseClient(t, hotPolicy)
	desc := map[string]string{"tenant": "acme"}
	warm(t, c, desc)
	const key = "weir:{acme}:hot:acme"
	if n.Outstanding("acme", key) == 0 {
		t.Fatal("no units out after a leased decision")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := n.Outstanding("acme", key); got != 0 {
		t.Fatalf("%d units still out after Shutdown, want all returned", got)
	}
	if st := n.Stats()["hot"]; st.CreditedUnits == 0 {
		t.Fatalf("nothing credited: %+v", st)
	}
	if _, err := c.Decide(ctx, desc, 1); err != client.ErrClosed {
		t.Fatalf("decide after shutdown: %v, want ErrClosed", err)
	}
}

func TestClient_Decide_nodeGoneFallsBackToDecideAndItsError(t *testing.T) {
	_, srv, c := leaseClient(t, hotPolicy)
	desc := map[string]string{"tenant": "acme"}
	warm(t, c, desc)
	srv.Stop()
	// Units held stay spendable until the stream's end is seen; then
	// every decision goes over Decide, which fails as without leases.
	waitFor(t, 5*time.Second, "a decision answered after the node went", func() bool {
		_, err := c.Decide(context.Background(), desc, 1)
		return err != nil
	})
}

func TestClient_Decide_ownersUnreachableFallBackToDecide(t *testing.T) {
	n, _, c := leaseClient(t, hotPolicy)
	desc := map[string]string{"tenant": "acme"}
	warm(t, c, desc)
	n.Down.Store(true) // the node answers every refresh item Busy
	before := n.Decides.Load()
	waitFor(t, 5*time.Second, "no decision went over Decide", func() bool {
		resp, err := c.Decide(context.Background(), desc, 1)
		return err == nil && !resp.GetFromLease() && n.Decides.Load() > before
	})
	n.Down.Store(false)
	warm(t, c, desc) // and back to leases once the owners answer
}

func TestClient_Decide_nodeWithoutLeasesIsDecidedOverDecide(t *testing.T) {
	srv := newFakeServer()
	addr := servertest.Serve(t, srv)
	cfg := client.DefaultConfig()
	cfg.Target = addr
	cfg.Leases = &client.LeaseConfig{}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 20 {
		if resp, err := c.Decide(context.Background(), map[string]string{"id": "x"}, 1); err != nil || resp.GetFromLease() {
			t.Fatalf("decide: %v %v", resp, err)
		}
	}
	if st := c.LeaseStats(); st.FromLease != 0 || st.DecideRPCs != 20 {
		t.Fatalf("stats %+v", st)
	}
}

func TestLeaseConfig_Validate_namesTheField(t *testing.T) {
	for _, tc := range []struct {
		want string
		lc   client.LeaseConfig
	}{
		{"tick", client.LeaseConfig{Tick: -1}},
		{"refresh timeout", client.LeaseConfig{RefreshTimeout: -1}},
		{"max keys", client.LeaseConfig{MaxKeys: -1}},
		{"refresh-when-left", client.LeaseConfig{Holder: lease.HolderConfig{RefreshWhenLeft: 2}}},
	} {
		cfg := client.DefaultConfig()
		cfg.Target = "127.0.0.1:1"
		cfg.Leases = &tc.lc
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.want, err)
		}
	}
}

func TestClient_Decide_policyReloadWithoutLeaseTermsStopsLeasing(t *testing.T) {
	n, _, c := leaseClient(t, hotPolicy)
	desc := map[string]string{"tenant": "acme"}
	warm(t, c, desc)
	n.SetPolicy(mustPolicy(t, "version: v2\nlimits:\n  - {name: hot, match: [tenant], rate: 1000/s, burst: 200}\n"))
	// The next refresh says the key is not leasable any more, the lookup
	// under v2 says so too, and from then on Decide answers.
	waitFor(t, 5*time.Second, "still deciding from leases", func() bool {
		resp, err := c.Decide(context.Background(), desc, 1)
		return err == nil && resp.GetPolicyVersion() == "v2" && !resp.GetFromLease()
	})
	before := c.LeaseStats().FromLease
	for range 20 {
		if resp, err := c.Decide(context.Background(), desc, 1); err != nil || resp.GetFromLease() {
			t.Fatalf("decide under v2: %v %v", resp, err)
		}
	}
	if got := c.LeaseStats().FromLease; got != before {
		t.Fatalf("%d decisions from leases under a policy that leases nothing", got-before)
	}
}

func TestClient_Decide_nodeBackLeasesAgainAsANewHolder(t *testing.T) {
	n, srv, c := leaseClient(t, hotPolicy)
	desc := map[string]string{"tenant": "acme"}
	warm(t, c, desc)
	srv.Stop()
	waitFor(t, 5*time.Second, "a decision answered after the node went", func() bool {
		_, err := c.Decide(context.Background(), desc, 1)
		return err != nil
	})
	clientleasetest.ServeAt(t, srv.Addr, n, clientlease.DefaultConfig(), nil)
	// Decide fails until the connection is made again (gRPC's backoff).
	waitFor(t, 10*time.Second, "no decision from a lease after the node came back", func() bool {
		resp, err := c.Decide(context.Background(), desc, 1)
		return err == nil && resp.GetFromLease()
	})
	if st := c.LeaseStats(); st.Streams != 2 {
		t.Fatalf("%d streams opened, want 2: the first and one after the node came back", st.Streams)
	}
}

func TestClient_Shutdown_endedContextReturnsPromptly(t *testing.T) {
	_, _, c := leaseClient(t, hotPolicy)
	warm(t, c, map[string]string{"tenant": "acme"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	began := time.Now()
	if err := c.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(began); d > 2*client.DefaultLeaseRefreshTimeout {
		t.Fatalf("Shutdown with an ended context took %s", d)
	}
}
