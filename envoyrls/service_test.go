package envoyrls

import (
	"context"
	"errors"
	"math"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	rlscommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/policy"
)

const testPolicy = `
limits:
  - {name: weir-own, match: [user], rate: 1/s, burst: 1}
  - {name: per-ip, domain: edge, match: [remote_address], rate: 2/s, burst: 2}
  - {name: trusted, domain: edge, match: [remote_address], values: {remote_address: 10.0.0.1}, unlimited: true}
  - {name: per-path, domain: edge, match: [path], rate: 5/m, burst: 5}
  - {name: per-user, domain: edge, match: [user], rate: 3/s, burst: 3, shadow: true}
  - {name: vip-path, domain: edge, match: [vip], rate: 100/s, burst: 100, replaces: [per-path]}
  - {name: closed, domain: strict, match: [k], rate: 1/s, burst: 1, on_failure: closed}
  - {name: open, domain: strict, match: [o], rate: 1/s, burst: 1, on_failure: open}
`

// clock is a settable time source for the limiter.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// downStore is a store whose dependency is always unreachable.
type downStore struct{}

func (downStore) Decide(context.Context, *decide.Request, []gcra.Result) (gcra.Result, error) {
	return gcra.Result{}, &limiter.UnavailableError{Reason: "redis_unavailable", Err: errors.New("connection refused")}
}

type fixture struct {
	client rlsv3.RateLimitServiceClient
	clock  *clock
	reg    *prometheus.Registry
}

// start serves the RLS API over real gRPC on a :0 port.
func start(t *testing.T, store limiter.Store) *fixture {
	t.Helper()
	p, err := policy.Parse("test.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{now: time.Unix(1_700_000_000, 0)}
	reg := prometheus.NewRegistry()
	lim, err := limiter.New(limiter.DefaultConfig(), policy.Static(p), store, nil, reg, limiter.WithClock(clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := New(lim, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	Register(s, svc)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &fixture{client: rlsv3.NewRateLimitServiceClient(conn), clock: clk, reg: reg}
}

func memStore() limiter.Store { return limiter.MemoryStore(memstore.New(memstore.DefaultConfig())) }

// desc builds one descriptor from key, value pairs.
func desc(kv ...string) *rlscommon.RateLimitDescriptor {
	d := &rlscommon.RateLimitDescriptor{}
	for i := 0; i < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlscommon.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func (f *fixture) call(t *testing.T, domain string, hits uint32, ds ...*rlscommon.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	resp, err := f.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: domain, Descriptors: ds, HitsAddend: hits})
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	return resp
}

func headers(resp *rlsv3.RateLimitResponse) map[string]string {
	out := map[string]string{}
	for _, h := range resp.GetResponseHeadersToAdd() {
		out[h.GetKey()] = h.GetValue()
	}
	return out
}

func TestShouldRateLimit_admitsThenDeniesWithHeaders(t *testing.T) {
	f := start(t, memStore())
	for i := range 2 {
		resp := f.call(t, "edge", 0, desc("remote_address", "1.2.3.4"))
		st := resp.GetStatuses()[0]
		if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || st.GetLimitRemaining() != uint32(1-i) {
			t.Fatalf("call %d: %v", i, resp)
		}
	}
	resp := f.call(t, "edge", 0, desc("remote_address", "1.2.3.4"))
	st := resp.GetStatuses()[0]
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT || st.GetCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("third call: %v", resp)
	}
	cl := st.GetCurrentLimit()
	if cl.GetRequestsPerUnit() != 2 || cl.GetUnit() != rlsv3.RateLimitResponse_RateLimit_SECOND || cl.GetName() != "per-ip" {
		t.Errorf("current_limit = %v, want 2 per SECOND named per-ip", cl)
	}
	if got := st.GetDurationUntilReset().AsDuration(); got != 500*time.Millisecond {
		t.Errorf("duration_until_reset = %s, want the 500ms until one more passes", got)
	}
	h := headers(resp)
	want := map[string]string{"Ratelimit-Policy": `"per-ip";q=2;w=1`, "Ratelimit": `"per-ip";r=0;t=1`, "Retry-After": "1"}
	for k, v := range want {
		if h[k] != v {
			t.Errorf("header %s = %q, want %q (all: %v)", k, h[k], v, h)
		}
	}
	// Another address has its own quota; time refills this one.
	if f.call(t, "edge", 0, desc("remote_address", "5.6.7.8")).GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Error("another address was limited")
	}
	f.clock.Advance(500 * time.Millisecond)
	if f.call(t, "edge", 0, desc("remote_address", "1.2.3.4")).GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Error("still limited after the retry-after")
	}
}

func TestShouldRateLimit_hitsAddend(t *testing.T) {
	f := start(t, memStore())
	// per-path: 5 a minute. 4 hits leave 1; a descriptor's own hits_addend
	// of 2 overrides the request's 1 and is refused.
	if r := f.call(t, "edge", 4, desc("path", "/a")).GetStatuses()[0]; r.GetLimitRemaining() != 1 {
		t.Fatalf("after 4 hits: %v", r)
	}
	d := desc("path", "/a")
	d.HitsAddend = wrapperspb.UInt64(2)
	if r := f.call(t, "edge", 1, d); r.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("2 more hits with 1 left: %v", r)
	}
	if r := f.call(t, "edge", 0, desc("path", "/a")).GetStatuses()[0]; r.GetCode() != rlsv3.RateLimitResponse_OK || r.GetLimitRemaining() != 0 {
		t.Fatalf("hits_addend 0 must count as 1: %v", r)
	}
}

func TestShouldRateLimit_descriptorsAreDecidedOneByOne(t *testing.T) {
	f := start(t, memStore())
	f.call(t, "edge", 2, desc("remote_address", "1.1.1.1"))
	resp := f.call(t, "edge", 0, desc("remote_address", "1.1.1.1"), desc("path", "/x"), desc("nothing", "here"), desc("remote_address", "10.0.0.1"))
	codes := []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OVER_LIMIT, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK}
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT || len(resp.GetStatuses()) != 4 {
		t.Fatalf("resp = %v", resp)
	}
	for i, st := range resp.GetStatuses() {
		if st.GetCode() != codes[i] {
			t.Errorf("statuses[%d] = %v, want %v", i, st.GetCode(), codes[i])
		}
	}
	// As in Envoy, the path's quota was spent although the request was refused.
	if st := resp.GetStatuses()[1]; st.GetLimitRemaining() != 4 || st.GetCurrentLimit().GetUnit() != rlsv3.RateLimitResponse_RateLimit_MINUTE {
		t.Errorf("path status = %v", st)
	}
	if st := resp.GetStatuses()[2]; st.GetCurrentLimit() != nil {
		t.Errorf("unmatched descriptor has a limit: %v", st)
	}
	if st := resp.GetStatuses()[3]; st.GetCurrentLimit() != nil || st.GetLimitRemaining() != math.MaxUint32 {
		t.Errorf("unlimited descriptor = %v", st)
	}
	if h := headers(resp)["Ratelimit-Policy"]; h != `"per-ip";q=2;w=1, "per-path";q=5;w=60` {
		t.Errorf("RateLimit-Policy = %q", h)
	}
}

func TestShouldRateLimit_replaces(t *testing.T) {
	f := start(t, memStore())
	f.call(t, "edge", 5, desc("path", "/p")) // spends per-path
	resp := f.call(t, "edge", 0, desc("path", "/p"), desc("vip", "gold"))
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || resp.GetStatuses()[0].GetCurrentLimit() != nil {
		t.Fatalf("vip-path replaces per-path, yet: %v", resp)
	}
	if r := f.call(t, "edge", 0, desc("path", "/p")); r.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("without the vip descriptor per-path applies: %v", r)
	}
}

func TestShouldRateLimit_shadowNeverDenies(t *testing.T) {
	f := start(t, memStore())
	var last *rlsv3.RateLimitResponse
	for range 5 {
		last = f.call(t, "edge", 0, desc("user", "u1"))
		if last.GetOverallCode() != rlsv3.RateLimitResponse_OK {
			t.Fatalf("shadow limit denied: %v", last)
		}
	}
	if got := gather(t, f.reg, "weir_decisions_total", "limit", "per-user", "result", "shadow_denied"); got != 2 {
		t.Errorf("shadow_denied = %v, want 2", got)
	}
	if _, ok := headers(last)["Ratelimit-Policy"]; ok {
		t.Error("a shadow limit was advertised")
	}
}

func TestShouldRateLimit_unknownDomain(t *testing.T) {
	f := start(t, memStore())
	resp := f.call(t, "nobody", 0, desc("remote_address", "1.2.3.4"), desc("user", "u"))
	if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || len(resp.GetStatuses()) != 2 {
		t.Fatalf("resp = %v", resp)
	}
	if _, err := f.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("empty request: %v", err)
	}
	if got := gather(t, f.reg, "weir_envoy_unknown_domain_requests_total"); got != 1 {
		t.Errorf("unknown domain counter = %v, want 1", got)
	}
}

func TestShouldRateLimit_failurePolicy(t *testing.T) {
	f := start(t, downStore{})
	closed := f.call(t, "strict", 0, desc("k", "v"))
	if closed.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT || headers(closed)["Weir-Fallback"] != "closed" {
		t.Errorf("on_failure closed: %v", closed)
	}
	open := f.call(t, "strict", 0, desc("o", "v"))
	if open.GetOverallCode() != rlsv3.RateLimitResponse_OK || headers(open)["Weir-Fallback"] != "open" {
		t.Errorf("on_failure open: %v", open)
	}
}

func TestShouldRateLimit_invalid(t *testing.T) {
	f := start(t, memStore())
	neg := desc("k", "v")
	neg.IsNegativeHits = true
	long := strings.Repeat("x", MaxBytes+1)
	tests := []struct {
		name string
		req  *rlsv3.RateLimitRequest
		want string
	}{
		{"no domain", &rlsv3.RateLimitRequest{Descriptors: []*rlscommon.RateLimitDescriptor{desc("k", "v")}}, "domain is empty"},
		{"no descriptors", &rlsv3.RateLimitRequest{Domain: "edge"}, "no descriptors"},
		{"empty descriptor", &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlscommon.RateLimitDescriptor{{}}}, "no entries"},
		{"negative hits", &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlscommon.RateLimitDescriptor{neg}}, "is_negative_hits"},
		{"huge cost", &rlsv3.RateLimitRequest{Domain: "edge", HitsAddend: math.MaxUint32, Descriptors: []*rlscommon.RateLimitDescriptor{desc("k", "v")}}, "exceeds"},
		{"long value", &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlscommon.RateLimitDescriptor{desc("path", long)}}, "entries[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.client.ShouldRateLimit(context.Background(), tt.req)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want INVALID_ARGUMENT with %q", err, tt.want)
			}
		})
	}
	// Nothing was consumed by the refused calls.
	if r := f.call(t, "edge", 5, desc("path", long[:10])); r.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Fatalf("quota was spent by refused calls: %v", r)
	}
}

func TestExpressRate(t *testing.T) {
	type want struct {
		n    uint32
		unit rlsv3.RateLimitResponse_RateLimit_Unit
		mult uint32 // 0: none
	}
	tests := []struct {
		n    int64
		per  time.Duration
		want want
	}{
		{5, time.Second, want{5, rlsv3.RateLimitResponse_RateLimit_SECOND, 0}},
		{7, time.Minute, want{7, rlsv3.RateLimitResponse_RateLimit_MINUTE, 0}},
		{120, time.Minute, want{120, rlsv3.RateLimitResponse_RateLimit_MINUTE, 0}},
		{1, 500 * time.Millisecond, want{2, rlsv3.RateLimitResponse_RateLimit_SECOND, 0}},
		{100, 24 * time.Hour, want{100, rlsv3.RateLimitResponse_RateLimit_DAY, 0}},
		{1, 10 * time.Second, want{6, rlsv3.RateLimitResponse_RateLimit_MINUTE, 0}},
		{1, 7 * time.Second, want{1, rlsv3.RateLimitResponse_RateLimit_SECOND, 7}},
		{1, 7 * time.Millisecond, want{12342857, rlsv3.RateLimitResponse_RateLimit_DAY, 0}}, // 86400/0.007, rounded
	}
	for _, tt := range tests {
		got := expressRate(tt.n, tt.per)
		g := want{got.GetRequestsPerUnit(), got.GetUnit(), got.GetUnitMultiplier().GetValue()}
		if g != tt.want {
			t.Errorf("expressRate(%d, %s) = %+v, want %+v", tt.n, tt.per, g, tt.want)
		}
	}
}

// gather returns the value of the counter name whose labels include the
// given name, value pairs; 0 if there is none.
func gather(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for i := 0; i < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					found = found || lp.GetName() == labels[i] && lp.GetValue() == labels[i+1]
				}
				if !found {
					continue metric
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
