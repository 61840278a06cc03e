package envoyrls

import (
	"math"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/httplimit"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/policy"
	"github.com/weirhq/weir/server"
)

// respond builds the response from each descriptor's decision (decs[i] is
// meaningful when ds[i].matched).
func respond(ds []descriptor, decs []limiter.Decision) *rlsv3.RateLimitResponse {
	out := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}
	merged := &weirv1.DecideResponse{Allowed: true}
	tooCostly := true
	var modes []string
	for i, d := range ds {
		st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
		out.Statuses = append(out.Statuses, st)
		if d.unlimited {
			st.LimitRemaining = unlimitedRemaining
		}
		if !d.matched {
			continue
		}
		dec := server.ToProto(decs[i])
		if len(dec.GetLimits()) != 1 {
			continue // the limit was not decided (cannot happen for one match)
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
	out.ResponseHeadersToAdd = headerValues(h)
	return out
}

// headerValues converts h to Envoy's form, in sorted order.
func headerValues(h http.Header) []*corev3.HeaderValue {
	var out []*corev3.HeaderValue
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range h {
			if !yield(k) {
				return
			}
		}
	}) {
		for _, v := range h[k] {
			out = append(out, &corev3.HeaderValue{Key: k, Value: v})
		}
	}
	return out
}

// units Envoy can name, shortest first.
var units = []struct {
	unit rlsv3.RateLimitResponse_RateLimit_Unit
	d    time.Duration
}{
	{rlsv3.RateLimitResponse_RateLimit_SECOND, time.Second},
	{rlsv3.RateLimitResponse_RateLimit_MINUTE, time.Minute},
	{rlsv3.RateLimitResponse_RateLimit_HOUR, time.Hour},
	{rlsv3.RateLimitResponse_RateLimit_DAY, 24 * time.Hour},
}

// currentLimit states m's rate as Envoy's current_limit: the limit's own
// rate when the tenant gets it unchanged, otherwise one unit per emission
// interval.
func currentLimit(m policy.Match) *rlsv3.RateLimitResponse_RateLimit {
	n, per := int64(1), time.Duration(m.Params.Interval)
	if r := m.Limit.Rate; m.Params == m.Limit.Params && r.N > 0 {
		n, per = r.N, r.Per
	}
	out := expressRate(n, per)
	out.Name = m.Limit.Name
	return out
}

// expressRate writes "n per per" as requests_per_unit per unit: as given
// when per is a unit, else exactly with the smallest unit that gives a
// whole count, else exactly as n per
// k units (unit_multiplier k), else rounded to the nearest count per day.
func expressRate(n int64, per time.Duration) *rlsv3.RateLimitResponse_RateLimit {
	for _, u := range units {
		if per == u.d && n > 0 && n <= math.MaxUint32 {
			return &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: uint32(n), Unit: u.unit}
		}
	}
	rate := big.NewRat(n, int64(per)) // units per nanosecond
	for _, u := range units {
		c := new(big.Rat).Mul(rate, big.NewRat(int64(u.d), 1))
		if c.IsInt() && c.Num().IsInt64() && c.Num().Int64() <= math.MaxUint32 && c.Num().Int64() > 0 {
			return &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: uint32(c.Num().Int64()), Unit: u.unit}
		}
	}
	for _, u := range slices.Backward(units) {
		if per%u.d == 0 && int64(per/u.d) <= math.MaxUint32 && n <= math.MaxUint32 {
			return &rlsv3.RateLimitResponse_RateLimit{
				RequestsPerUnit: uint32(n), Unit: u.unit,
				UnitMultiplier: wrapperspb.UInt32(uint32(per / u.d)),
			}
		}
	}
	perDay, _ := new(big.Rat).Mul(rate, big.NewRat(int64(24*time.Hour), 1)).Float64()
	return &rlsv3.RateLimitResponse_RateLimit{
		RequestsPerUnit: uint32(min(max(math.Round(perDay), 1), math.MaxUint32)),
		Unit:            rlsv3.RateLimitResponse_RateLimit_DAY,
	}
}
