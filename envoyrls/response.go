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
// when it is matched). Its messages come from one answerSlab.
func respond(ds []descriptor) *rlsv3.RateLimitResponse {
	a := newAnswerSlab(len(ds))
	out := &a.resp
	out.OverallCode = rlsv3.RateLimitResponse_OK
	out.Statuses = a.statuses
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
	out.ResponseHeadersToAdd = a.headerList(stateField, policyField, retryAfter, strings.Join(modes, ", "))
	return out
}

// answerSlab holds the messages of one answer: the response, its statuses
// and its headers. The answer to one descriptor (Envoy's usual call) is a
// single allocation; more descriptors add two for their statuses. The
// messages keep the whole slab reachable, and go out of use with it.
type answerSlab struct {
	resp       rlsv3.RateLimitResponse
	statuses   []*rlsv3.RateLimitResponse_DescriptorStatus
	one        [1]rlsv3.RateLimitResponse_DescriptorStatus
	onePtr     [1]*rlsv3.RateLimitResponse_DescriptorStatus
	headers    [numHeaders]corev3.HeaderValue
	headerPtrs [numHeaders]*corev3.HeaderValue
}

// newAnswerSlab returns a slab with n zero statuses.
func newAnswerSlab(n int) *answerSlab {
	a := new(answerSlab)
	slab, ptrs := a.one[:], a.onePtr[:]
	if n != 1 {
		slab = make([]rlsv3.RateLimitResponse_DescriptorStatus, n)
		ptrs = make([]*rlsv3.RateLimitResponse_DescriptorStatus, n)
	}
	for i := range slab {
		ptrs[i] = &slab[i]
	}
	a.statuses = ptrs
	return a
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
	numHeaders            = 4
)

// headerList returns the non-empty values as Envoy headers under the names
// above, in their sorted order, from a's headers; nil when all are empty.
func (a *answerSlab) headerList(state, policy, retryAfter, fallback string) []*corev3.HeaderValue {
	fields := [numHeaders]struct{ key, value string }{
		{headerRateLimit, state}, {headerRateLimitPolicy, policy},
		{headerRetryAfter, retryAfter}, {headerFallback, fallback},
	}
	out := a.headerPtrs[:0]
	for _, f := range fields {
		if f.value != "" {
			h := &a.headers[len(out)]
			h.Key, h.Value = f.key, f.value
			out = append(out, h)
		}
	}
	if len(out) == 0 {
		return nil
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
