package envoyrls

import (
	"context"
	"testing"

	rlscommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/policy"
)

// countingStore admits everything and counts the requests it decides.
type countingStore struct{ reqs []decide.Request }

func (s *countingStore) Decide(_ context.Context, r *decide.Request, out []gcra.Result) (gcra.Result, error) {
	s.reqs = append(s.reqs, r.Clone())
	for i := range out {
		out[i] = gcra.Result{Allowed: true, Remaining: 1}
	}
	if r.Grant != nil {
		r.Grant.Permit = []byte("permit")
	}
	return gcra.Result{Allowed: true, Remaining: 1}, nil
}

// TestShouldRateLimit_concurrencyLimitNotEvaluated: a descriptor matching
// only a concurrency limit is answered OK without current_limit and takes
// no permit (the store is never asked); a rate descriptor beside it is
// decided as usual.
func TestShouldRateLimit_concurrencyLimitNotEvaluated(t *testing.T) {
	p, err := policy.Parse("c.yaml", []byte(`
limits:
  - {name: exports, domain: edge, match: [job], rate: 2/m, burst: 2, replaces: [per-ip]}
  - {name: per-ip, domain: edge, match: [remote_address], rate: 2/s, burst: 2}
`))
	if err != nil {
		t.Fatal(err)
	}
	p.Limit("exports").Def().Concurrency = true // until policy has kind: concurrency
	store := &countingStore{}
	lim, err := limiter.New(limiter.DefaultConfig(), policy.Static(p), store, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := New(lim, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // more than max in flight: never denied, as never counted
		resp, err := svc.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*rlscommon.RateLimitDescriptor{desc("job", "export")}})
		if err != nil {
			t.Fatal(err)
		}
		st := resp.GetStatuses()[0]
		if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK || st.GetCode() != rlsv3.RateLimitResponse_OK || st.GetCurrentLimit() != nil {
			t.Fatalf("concurrency descriptor answered %v", resp)
		}
	}
	if len(store.reqs) != 0 {
		t.Fatalf("the store decided %d requests for a concurrency limit: %+v", len(store.reqs), store.reqs)
	}
	// A skipped concurrency limit replaces nothing: per-ip is decided.
	resp, err := svc.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge",
		Descriptors: []*rlscommon.RateLimitDescriptor{desc("job", "export"), desc("remote_address", "1.2.3.4")}})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetStatuses()[1].GetCurrentLimit().GetName(); got != "per-ip" || len(store.reqs) != 1 || store.reqs[0].Grant != nil {
		t.Errorf("rate descriptor: current limit %q, %d store calls %+v; want per-ip decided once, plainly", got, len(store.reqs), store.reqs)
	}
}
