package envoyrls

import (
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/httplimit"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/policy"
	"github.com/weirhq/weir/server"
)

// naiveRespond is respond as it was first written: a weir.v1 response per
// descriptor, the fields through an http.Header, sorted. respond must
// answer exactly as it does.
func naiveRespond(ds []descriptor) *rlsv3.RateLimitResponse {
	out := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}
	merged := &weirv1.DecideResponse{Allowed: true}
	tooCostly := true
	var modes []string
	for _, d := range ds {
		st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
		out.Statuses = append(out.Statuses, st)
		if d.unlimited {
			st.LimitRemaining = unlimitedRemaining
		}
		if !d.matched {
			continue
		}
		dec := server.ToProto(d.decision)
		if len(dec.GetLimits()) != 1 {
			continue
		}
		l := dec.GetLimits()[0]
		st.CurrentLimit = currentLimit(d.match)
		st.LimitRemaining = uint32(min(max(l.GetRemaining(), 0), math.MaxUint32))
		st.DurationUntilReset = l.GetResetAfter()
		if !dec.GetAllowed() {
			st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
			out.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
			merged.Allowed = false
			tooCostly = tooCostly && dec.GetTooCostly()
			if !dec.GetTooCostly() {
				st.DurationUntilReset = l.GetRetryAfter()
			}
			if dec.GetRetryAfter().AsDuration() > merged.GetRetryAfter().AsDuration() {
				merged.RetryAfter = dec.GetRetryAfter()
			}
		}
		merged.Limits = append(merged.Limits, l)
		if fb := dec.GetFallback(); fb != nil && !slices.Contains(modes, fb.GetMode()) {
			modes = append(modes, fb.GetMode())
		}
	}
	merged.TooCostly = !merged.Allowed && tooCostly
	h := http.Header{}
	httplimit.WriteHeaders(h, merged)
	if len(modes) > 0 {
		h.Set(httplimit.FallbackField, strings.Join(modes, ", "))
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range h {
			if !yield(k) {
				return
			}
		}
	}) {
		for _, v := range h[k] {
			out.ResponseHeadersToAdd = append(out.ResponseHeadersToAdd, &corev3.HeaderValue{Key: k, Value: v})
		}
	}
	return out
}

func TestRespond_matchesNaiveRespond(t *testing.T) {
	p, err := policy.Parse("test.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	entries := [][]policy.EnvoyEntry{
		{{Key: "remote_address", Value: "1.2.3.4"}},
		{{Key: "remote_address", Value: "10.0.0.1"}},
		{{Key: "path", Value: "/a"}},
		{{Key: "user", Value: "u"}},
		{{Key: "vip", Value: "v"}},
		{{Key: "nothing", Value: "x"}},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	dur := func() time.Duration {
		return []time.Duration{0, time.Nanosecond, 999 * time.Millisecond, time.Second, 61 * time.Second}[rng.IntN(5)]
	}
	for run := range 5000 {
		n := 1 + rng.IntN(4)
		ds := make([]descriptor, n)
		for i := range ds {
			ds[i].match, ds[i].matched = p.ResolveEnvoy("edge", entries[rng.IntN(len(entries))])
			if ds[i].matched && (ds[i].match.Limit.Envoy.Unlimited || rng.IntN(5) == 0) {
				ds[i].matched, ds[i].unlimited = false, true
			}
			if !ds[i].matched {
				continue
			}
			allowed, tooCostly := rng.IntN(2) == 0, rng.IntN(4) == 0
			l := limiter.LimitDecision{Name: ds[i].match.Limit.Name, Shadow: rng.IntN(4) == 0, Allowed: allowed,
				TooCostly: tooCostly, Remaining: rng.Int64N(20) - 2, RetryAfter: dur(), ResetAfter: dur(),
				Burst: rng.Int64N(10), Window: dur()}
			ds[i].decision = limiter.Decision{Allowed: allowed, TooCostly: tooCostly, Matched: true, RetryAfter: l.RetryAfter,
				Remaining: l.Remaining, ResetAfter: l.ResetAfter, Limits: []limiter.LimitDecision{l}}
			if rng.IntN(3) == 0 {
				ds[i].decision.Limits = append(ds[i].decision.Limits, l) // not decided as one limit: skipped
			}
			if rng.IntN(4) == 0 {
				ds[i].decision.Fallback = &limiter.Fallback{Mode: []string{"open", "closed", "local"}[rng.IntN(3)], Reason: "r"}
			}
		}
		got, want := respond(ds), naiveRespond(ds)
		if !proto.Equal(got, want) {
			t.Fatalf("run %d:\ngot  %v\nwant %v", run, got, want)
		}
		gb, _ := proto.MarshalOptions{Deterministic: true}.Marshal(got)
		wb, _ := proto.MarshalOptions{Deterministic: true}.Marshal(want)
		if string(gb) != string(wb) {
			t.Fatalf("run %d: wire forms differ", run)
		}
	}
}

func TestHeaderList_namesAreCanonicalAndSorted(t *testing.T) {
	names := []string{headerRateLimit, headerRateLimitPolicy, headerRetryAfter, headerFallback}
	for i, f := range []string{httplimit.RateLimitField, httplimit.RateLimitPolicyField, httplimit.RetryAfterField, httplimit.FallbackField} {
		if got := http.CanonicalHeaderKey(f); got != names[i] {
			t.Errorf("CanonicalHeaderKey(%q) = %q, respond writes %q", f, got, names[i])
		}
	}
	if !slices.IsSorted(names) {
		t.Errorf("header names %q are not in sorted order", names)
	}
	if got := newAnswerSlab(1).headerList("", "", "", ""); got != nil {
		t.Errorf("headerList of no values = %v, want nil", got)
	}
}
