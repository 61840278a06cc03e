package rlqstest

import (
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

var acme = map[string]string{"tenant": "acme"}

func tokens(max, perFill uint32, ttl time.Duration) *rlqsv3.RateLimitQuotaResponse {
	return &rlqsv3.RateLimitQuotaResponse{BucketAction: []*rlqsv3.RateLimitQuotaResponse_BucketAction{{
		BucketId: &rlqsv3.BucketId{Bucket: acme},
		BucketAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{QuotaAssignmentAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
			AssignmentTimeToLive: durationpb.New(ttl),
			RateLimitStrategy: &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_TokenBucket{TokenBucket: &typev3.TokenBucket{
				MaxTokens: max, TokensPerFill: wrapperspb.UInt32(perFill), FillInterval: durationpb.New(time.Second)}}},
		}}}}}
}

const ms = int64(time.Millisecond)

// admits counts the requests admitted at now.
func admits(f *Filter, now int64, n int) int {
	got := 0
	for range n {
		if ok, _ := f.Request(acme, now); ok {
			got++
		}
	}
	return got
}

func TestFilter_Request_firstReportAndNoAssignment(t *testing.T) {
	f := NewFilter(FilterConfig{Domain: "edge", ReportingInterval: time.Second})
	ok, first := f.Request(acme, 0)
	if ok || first == nil || len(first.GetBucketQuotaUsages()) != 1 || first.GetBucketQuotaUsages()[0].GetNumRequestsDenied() != 1 {
		t.Fatalf("first request: allowed %v, report %v; want denied (DENY_ALL by default) and reported at once", ok, first)
	}
	if ok, again := f.Request(acme, ms); ok || again != nil {
		t.Fatalf("second request: allowed %v, report %v; want denied and no immediate report", ok, again)
	}
	if r := f.Report(2 * ms); r.GetBucketQuotaUsages()[0].GetNumRequestsDenied() != 1 {
		t.Fatalf("periodic report %v, want the one denial since the first report", r)
	}
}

func TestFilter_Apply_tokenBucket(t *testing.T) {
	f := NewFilter(FilterConfig{Domain: "edge", ReportingInterval: time.Second})
	f.Request(acme, 0)
	f.Apply(tokens(5, 10, 2500*time.Millisecond), 0)
	if got := admits(f, 0, 10); got != 5 {
		t.Fatalf("a new bucket admitted %d at once, want its 5 tokens (it starts full)", got)
	}
	f.Apply(tokens(5, 10, 2*time.Second), 550*ms) // the same bucket: kept, its TTL restarts
	if got := admits(f, 550*ms, 10); got != 5 {
		t.Fatalf("after 550ms at 10/s, %d admitted, want 5 (the bucket kept its level and filled)", got)
	}
	f.Apply(tokens(6, 10, 2*time.Second), 600*ms) // another bucket: a new full one
	if got := admits(f, 600*ms, 10); got != 6 {
		t.Fatalf("a changed bucket admitted %d, want its 6 fresh tokens", got)
	}
	// The TTL counts whole seconds from the last assignment: 2s from 600ms.
	if got := admits(f, 2599*ms, 100); got != 6 {
		t.Fatalf("just before expiry %d admitted, want 6 (full again)", got)
	}
	if got := admits(f, 2600*ms, 10); got != 0 {
		t.Fatalf("after expiry %d admitted, want 0 (no assignment: DENY_ALL)", got)
	}
}

func TestFilter_Apply_expiredFallbackAndAbandon(t *testing.T) {
	f := NewFilter(FilterConfig{Domain: "edge", ReportingInterval: time.Second, Expired: &Fallback{Allow: true, TTL: time.Second}})
	f.Request(acme, 0)
	f.Apply(tokens(1, 1, 1500*time.Millisecond), 0) // 1.5s: Envoy reads 1s
	if got := admits(f, 1000*ms, 3); got != 3 {
		t.Fatalf("in the expired fallback %d admitted, want 3 (ALLOW_ALL)", got)
	}
	if got := admits(f, 2000*ms, 3); got != 0 {
		t.Fatalf("after the fallback %d admitted, want 0", got)
	}
	f.Apply(&rlqsv3.RateLimitQuotaResponse{BucketAction: []*rlqsv3.RateLimitQuotaResponse_BucketAction{{BucketId: &rlqsv3.BucketId{Bucket: acme},
		BucketAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_AbandonAction_{AbandonAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_AbandonAction{}}}}}, 2100*ms)
	if _, first := f.Request(acme, 2200*ms); f.Buckets() != 1 || first == nil {
		t.Fatal("after an abandon the next request did not create the bucket again with an immediate report")
	}
}
