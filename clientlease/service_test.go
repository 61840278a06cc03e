package clientlease_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/clientlease"
	"github.com/weirhq/weir/clientlease/clientleasetest"
	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/clock/clocktest"
	"github.com/weirhq/weir/policy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testPolicy = `version: v1
limits:
  - {name: hot, match: [tenant], rate: 1000/s, burst: 200, lease: {max: 50, ttl: 250ms}}
  - {name: nolease, match: [user], rate: 1000/s, burst: 200}
  - {name: strict, match: [org], rate: 1000/s, burst: 200, consistency: strict}
  - {name: tiny, match: [ip], rate: 1000/s, burst: 2, lease: {max: 1, ttl: 250ms}}
`

type fixture struct {
	node *clientleasetest.Node
	srv  *clientleasetest.Server
	rpc  weirv1.LeasesClient
}

func start(t *testing.T, cfg clientlease.Config, clk clock.Clock) fixture {
	t.Helper()
	p, err := policy.Parse("test.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	n := clientleasetest.New(p)
	srv := clientleasetest.Serve(t, n, cfg, clk)
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return fixture{node: n, srv: srv, rpc: weirv1.NewLeasesClient(conn)}
}

func (f fixture) open(t *testing.T) weirv1.Leases_HoldClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := f.rpc.Hold(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func exchange(t *testing.T, s weirv1.Leases_HoldClient, req *weirv1.HoldRequest) (*weirv1.HoldResponse, error) {
	t.Helper()
	// A stream the server has ended fails Send with io.EOF; Recv then
	// returns its status.
	_ = s.Send(req)
	return s.Recv()
}

var acme = map[string]string{"tenant": "acme"}

const acmeKey = "weir:{acme}:hot:acme"

func ask(demand float64) *weirv1.HoldRequest {
	return &weirv1.HoldRequest{Seq: 1, Items: []*weirv1.LeaseItem{{Descriptors: acme, Key: acmeKey, Demand: demand}}}
}

func TestService_Hold_lookupsAnswerThePolicysTerms(t *testing.T) {
	f := start(t, clientlease.DefaultConfig(), nil)
	s := f.open(t)
	resp, err := exchange(t, s, &weirv1.HoldRequest{Seq: 7, Lookups: []*weirv1.LeaseLookup{
		{Descriptors: acme}, {Descriptors: map[string]string{"user": "u"}}, {Descriptors: map[string]string{"org": "o"}},
		{Descriptors: map[string]string{"ip": "1"}}, {Descriptors: map[string]string{"nope": "x"}},
		{Descriptors: map[string]string{"tenant": "acme", "user": "u"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetSeq() != 7 || resp.GetPolicyVersion() != "v1" || len(resp.GetLookups()) != 6 {
		t.Fatalf("response %v", resp)
	}
	hot := resp.GetLookups()[0]
	l := hot.GetLimits()
	if !hot.GetLeasable() || len(l) != 1 || l[0].GetKey() != acmeKey || l[0].GetBurst() != 200 ||
		l[0].GetInterval().AsDuration() != time.Millisecond || l[0].GetMaxUnits() != 50 || l[0].GetTtl().AsDuration() != 250*time.Millisecond {
		t.Fatalf("hot: %v", hot)
	}
	for i, why := range []string{"nolease", "strict", "tiny", "unknown descriptor", "nolease"} {
		got := resp.GetLookups()[i+1]
		if got.GetLeasable() || len(got.GetLimits()) != 0 || !strings.Contains(got.GetReason(), why) {
			t.Errorf("lookup %d: %v, want not leasable because of %q", i+1, got, why)
		}
	}
}

func TestService_Hold_grantsReturnsAndNamesTheHolder(t *testing.T) {
	f := start(t, clientlease.DefaultConfig(), nil)
	s1, s2 := f.open(t), f.open(t)
	r1, err := exchange(t, s1, ask(1000))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := exchange(t, s2, ask(1000))
	if err != nil {
		t.Fatal(err)
	}
	g := r1.GetGrants()[0]
	if g.GetOutcome() != weirv1.LeaseGrant_GRANTED || g.GetUnits() != 50 || g.GetTtl().AsDuration() != 250*time.Millisecond || g.GetLimit().GetName() != "hot" {
		t.Fatalf("grant %v", g)
	}
	if h1, h2 := r1.GetHolder(), r2.GetHolder(); h1 == h2 || !strings.HasPrefix(h1, "test#1/") || !strings.HasPrefix(h2, "test#1/") {
		t.Fatalf("holders %q and %q: want distinct names the node chose", h1, h2)
	}
	// The second holder cannot return the first's lease: nothing credited.
	steal := &weirv1.HoldRequest{Seq: 2, Items: []*weirv1.LeaseItem{{Descriptors: acme, Key: acmeKey,
		ReturnGrantor: g.GetGrantor(), ReturnLease: g.GetLease(), ReturnUnspent: 50}}}
	if r, err := exchange(t, s2, steal); err != nil || r.GetGrants()[0].GetCredited() != 0 {
		t.Fatalf("a return of another holder's lease: %v %v", r, err)
	}
	if got := f.node.Outstanding("acme", acmeKey); got != 100 {
		t.Fatalf("%d units out, want both grants' 100", got)
	}
	// The first holder returns 30 unspent and asks for nothing.
	ret := &weirv1.HoldRequest{Seq: 2, Items: []*weirv1.LeaseItem{{Descriptors: acme, Key: acmeKey,
		ReturnGrantor: g.GetGrantor(), ReturnLease: g.GetLease(), ReturnUnspent: 30}}}
	r, err := exchange(t, s1, ret)
	if err != nil || r.GetGrants()[0].GetOutcome() != weirv1.LeaseGrant_SETTLED || r.GetGrants()[0].GetCredited() != 30 {
		t.Fatalf("return: %v %v", r, err)
	}
	if got := f.node.Outstanding("acme", acmeKey); got != 50 {
		t.Fatalf("%d units out after the return, want 50", got)
	}
}

func TestService_Hold_badInputIsRefusedAndChangesNothing(t *testing.T) {
	cfg := clientlease.DefaultConfig()
	cfg.MaxItems, cfg.MaxLookups = 2, 1
	item := func(edit func(*weirv1.LeaseItem)) *weirv1.HoldRequest {
		it := &weirv1.LeaseItem{Descriptors: acme, Key: acmeKey, Demand: 100}
		edit(it)
		return &weirv1.HoldRequest{Items: []*weirv1.LeaseItem{it}}
	}
	cases := []struct {
		name, want string
		req        *weirv1.HoldRequest
	}{
		{"nan demand", "items[0].demand", item(func(it *weirv1.LeaseItem) { it.Demand = math.NaN() })},
		{"negative demand", "items[0].demand", item(func(it *weirv1.LeaseItem) { it.Demand = -1 })},
		{"infinite demand", "items[0].demand", item(func(it *weirv1.LeaseItem) { it.Demand = math.Inf(1) })},
		{"unspent without lease", "items[0].return_unspent", item(func(it *weirv1.LeaseItem) { it.ReturnUnspent = 5 })},
		{"negative unspent", "items[0].return_unspent", item(func(it *weirv1.LeaseItem) { it.ReturnLease, it.ReturnUnspent = 1, -5 })},
		{"no key", "items[0].key", item(func(it *weirv1.LeaseItem) { it.Key = "" })},
		{"long key", "items[0].key", item(func(it *weirv1.LeaseItem) { it.Key = strings.Repeat("k", 2000) })},
		{"no descriptors", "items[0].descriptors", item(func(it *weirv1.LeaseItem) { it.Descriptors = nil })},
		{"too many items", "items: 3", &weirv1.HoldRequest{Items: []*weirv1.LeaseItem{{Key: "a"}, {Key: "b"}, {Key: "c"}}}},
		{"too many lookups", "lookups: 2", &weirv1.HoldRequest{Lookups: []*weirv1.LeaseLookup{{Descriptors: acme}, {Descriptors: acme}}}},
		{"key twice", "items[1].key", &weirv1.HoldRequest{Items: []*weirv1.LeaseItem{
			{Descriptors: acme, Key: acmeKey, Demand: 100}, {Descriptors: acme, Key: acmeKey, Demand: 100}}}},
	}
	f := start(t, cfg, nil)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := exchange(t, f.open(t), tc.req)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want INVALID_ARGUMENT naming %q", err, tc.want)
			}
		})
	}
	if n := f.node.Refreshes.Load(); n != 0 {
		t.Fatalf("%d refreshes relayed for bad input, want none", n)
	}
	if st := f.node.Stats(); len(st) != 0 {
		t.Fatalf("the ledger changed: %v", st)
	}
}

func TestService_Hold_boundsHolders(t *testing.T) {
	cfg := clientlease.DefaultConfig()
	cfg.MaxHoldersPerConn, cfg.MaxHolders = 1, 2
	f := start(t, cfg, nil)
	if _, err := exchange(t, f.open(t), &weirv1.HoldRequest{}); err != nil {
		t.Fatal(err)
	}
	_, err := exchange(t, f.open(t), &weirv1.HoldRequest{})
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "on this connection") {
		t.Fatalf("a second holder on one connection: %v, want RESOURCE_EXHAUSTED", err)
	}
	other := start(t, cfg, nil) // another node: its own count
	if got := other.srv.Service.Holders(); got != 0 {
		t.Fatalf("%d holders on a fresh node", got)
	}
	if got := f.srv.Service.Holders(); got != 1 {
		t.Fatalf("%d holders open, want 1 (the refused one is not counted)", got)
	}
}

func TestService_Hold_unitsComeBackOneTTLAfterTheHolderGoes(t *testing.T) {
	f := start(t, clientlease.DefaultConfig(), nil)
	s := f.open(t)
	if r, err := exchange(t, s, ask(1000)); err != nil || r.GetGrants()[0].GetUnits() != 50 {
		t.Fatalf("grant: %v %v", r, err)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err == nil {
		t.Fatal("the stream did not end")
	}
	gone := time.Now()
	waitFor(t, 5*time.Second, func() bool { return f.srv.Service.Holders() == 0 })
	if got := f.node.Outstanding("acme", acmeKey); got != 50 && time.Since(gone) < 200*time.Millisecond {
		t.Fatalf("%d units out right after the holder went, want its 50 until they expire", got)
	}
	waitFor(t, 5*time.Second, func() bool { return f.node.Outstanding("acme", acmeKey) == 0 })
	if d := time.Since(gone); d > 2*time.Second {
		t.Fatalf("units came back after %s, want one TTL (250ms) and the grace", d)
	}
}

func TestService_Hold_idleHolderIsEnded(t *testing.T) {
	clk := clocktest.NewManual(time.Unix(0, 0))
	cfg := clientlease.DefaultConfig()
	f := start(t, cfg, clk)
	s := f.open(t)
	if _, err := exchange(t, s, &weirv1.HoldRequest{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := clk.WaitForTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(cfg.IdleTimeout)
	if _, err := s.Recv(); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("an idle holder: %v, want DEADLINE_EXCEEDED", err)
	}
}

func TestConfig_Validate_namesTheField(t *testing.T) {
	for _, tc := range []struct {
		want string
		edit func(*clientlease.Config)
	}{
		{"name", func(c *clientlease.Config) { c.Name = "" }},
		{"max holders", func(c *clientlease.Config) { c.MaxHoldersPerConn = 0 }},
		{"max items", func(c *clientlease.Config) { c.MaxItems = 0 }},
		{"idle timeout", func(c *clientlease.Config) { c.IdleTimeout = 0 }},
	} {
		c := clientlease.DefaultConfig()
		c.Name = "n#1"
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.want, err)
		}
	}
}

func waitFor(t *testing.T, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", within)
		}
		time.Sleep(time.Millisecond) // polling a condition
	}
}

func TestService_Shutdown_endsStreamsAndRefusesNewOnes(t *testing.T) {
	f := start(t, clientlease.DefaultConfig(), nil)
	s := f.open(t)
	if _, err := exchange(t, s, ask(1000)); err != nil {
		t.Fatal(err)
	}
	f.srv.Service.Shutdown()
	f.srv.Service.Shutdown() // idempotent
	if _, err := s.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("an open stream after Shutdown: %v, want UNAVAILABLE", err)
	}
	if _, err := exchange(t, f.open(t), &weirv1.HoldRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("a new stream after Shutdown: %v, want UNAVAILABLE", err)
	}
	waitFor(t, 5*time.Second, func() bool { return f.srv.Service.Holders() == 0 })
	var nilService *clientlease.Service
	nilService.Shutdown()
}
