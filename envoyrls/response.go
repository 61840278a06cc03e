package envoyrls

import (
	"math"
	"math/big"
	"slices"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/httplimit"
	"github.com/weirhq/weir/policy"
	"github.com/weirhq/weir/server"
)

// respond builds the response from each descriptor's decision (meaningful
// when it is matched). The statuses and the header list are each
// allocated as one slab.
func respond(ds []descriptor) *rlsv3.RateLimitResponse {
	out := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}
	out.Statuses = statusSlab(len(ds))
	merged := weirv1.DecideResponse{Allowed: true}
	var one [1]*weirv1.LimitStatus // the limits of a one-descriptor call, on the stack
	merged.Limits = one[:0]
	tooCostly := true
	var modes []string
	for i, d := range ds {
		st := out.Statuses[i]
		st.Code = rlsv3.RateLimitResponse_OK
		if d.unlimited {
			st.LimitRemaining = unlimitedRemaining
		}
		if !d.matched {
			continue
		}
		dec := server.ToProto(d.decision)
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
	policyField, stateField, retryAfter := httplimit.Fields(&merged)
	out.ResponseHeadersToAdd = headerList(stateField, policyField, retryAfter, strings.Join(modes, ", "))
	return out
}

// statusSlab returns n zero statuses allocated together.
func statusSlab(n int) []*rlsv3.RateLimitResponse_DescriptorStatus {
	slab := make([]rlsv3.RateLimitResponse_DescriptorStatus, n)
	out := make([]*rlsv3.RateLimitResponse_DescriptorStatus, n)
	for i := range slab {
		out[i] = &slab[i]
	}
	return out
}

// The header fields respond adds, under the names an http.Header would
// canonicalize them to (httplimit's field names through
// http.CanonicalHeaderKey), in sorted order: Envoy's header list carries
// them as an http.Header written by httplimit.WriteHeaders, sorted, would.
const (
	headerRateLimit       = "Ratelimit"
	headerRateLimitPolicy = "Ratelimit-Policy"
	headerRetryAfter      = "Retry-After"
	headerFallback        = "Weir-Fallback"
)

// headerList returns the non-empty values as Envoy headers under the names
// above, in their sorted order, allocated as one slab; nil when all are
// empty.
func headerList(state, policy, retryAfter, fallback string) []*corev3.HeaderValue {
	fields := [...]struct{ key, value string }{
		{headerRateLimit, state}, {headerRateLimitPolicy, policy},
		{headerRetryAfter, retryAfter}, {headerFallback, fallback},
	}
	n := 0
	for _, f := range fields {
		if f.value != "" {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	slab := make([]corev3.HeaderValue, n)
	out := make([]*corev3.HeaderValue, 0, n)
	for _, f := range fields {
		if f.value != "" {
			h := &slab[len(out)]
			h.Key, h.Value = f.key, f.value
			out = append(out, h)
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
