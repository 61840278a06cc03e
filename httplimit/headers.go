package httplimit

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Header field names written by this package.
const (
	// RateLimitField carries each enforced limit's live state (r, t).
	RateLimitField = "RateLimit"
	// RateLimitPolicyField carries each enforced limit's quota (q, w).
	RateLimitPolicyField = "RateLimit-Policy"
	// RetryAfterField is set on denials that waiting can cure.
	RetryAfterField = "Retry-After"
	// FallbackField marks a response whose decision was not made normally:
	// its value is "open" or "closed" when the middleware could not reach
	// weir, or the mode weir reports when its own failure policy decided.
	FallbackField = "Weir-Fallback"
)

// maxSFInteger is the largest Integer a Structured Field may carry
// (RFC 8941, section 3.3.1: at most 15 decimal digits).
const maxSFInteger = 999_999_999_999_999

// StatusCode is the HTTP status for a decision: 200 when allowed, 429 when
// denied, too_costly included. A nil resp counts as denied.
func StatusCode(resp *weirv1.DecideResponse) int {
	if resp.GetAllowed() {
		return http.StatusOK
	}
	return http.StatusTooManyRequests
}

// WriteHeaders sets RateLimit-Policy and RateLimit (one member per enforced
// limit, in response order; shadow limits are left out) when resp has any
// enforced limit, and Retry-After when resp is a denial that is not
// too_costly. Fields it sets replace earlier values; fields it does not set
// are left alone. A nil resp writes nothing. See the package documentation
// for the pinned syntax.
func WriteHeaders(h http.Header, resp *weirv1.DecideResponse) {
	policy, state, retryAfter := Fields(resp)
	if policy != "" {
		h.Set(RateLimitPolicyField, policy)
		h.Set(RateLimitField, state)
	}
	if retryAfter != "" {
		h.Set(RetryAfterField, retryAfter)
	}
}

// Fields returns the values WriteHeaders sets from resp: policy
// (RateLimit-Policy) and state (RateLimit), both empty when resp has no
// enforced limit, and retryAfter (Retry-After), empty unless resp is a
// denial that is not too_costly. It is for callers that carry the fields
// in another form than an http.Header (Envoy's header list).
func Fields(resp *weirv1.DecideResponse) (policy, state, retryAfter string) {
	if resp == nil {
		return "", "", ""
	}
	var pb, sb strings.Builder
	if n := len(resp.GetLimits()); n > 0 {
		// a member is its quoted name and about 20 bytes: one allocation
		// each for the usual names instead of a doubling per write
		pb.Grow(n * (len(resp.GetLimits()[0].GetName()) + 24))
		sb.Grow(n * (len(resp.GetLimits()[0].GetName()) + 24))
	}
	for _, l := range resp.GetLimits() {
		if l.GetShadow() {
			continue
		}
		if pb.Len() > 0 {
			pb.WriteString(", ")
			sb.WriteString(", ")
		}
		name := sfString(l.GetName())
		pb.WriteString(name)
		pb.WriteString(";q=")
		pb.WriteString(sfInteger(l.GetBurst()))
		pb.WriteString(";w=")
		pb.WriteString(sfInteger(max(1, ceilSeconds(l.GetWindow()))))

		sb.WriteString(name)
		sb.WriteString(";r=")
		sb.WriteString(sfInteger(l.GetRemaining()))
		sb.WriteString(";t=")
		sb.WriteString(sfInteger(resetSeconds(l)))
	}
	if !resp.GetAllowed() && !resp.GetTooCostly() {
		retryAfter = strconv.FormatInt(retryAfterSeconds(resp.GetRetryAfter()), 10)
	}
	return pb.String(), sb.String(), retryAfter
}

// resetSeconds is the RateLimit "t" of one limit. GCRA refills
// continuously, so "until the quota resets" is read as: for a limit that
// denies, until this request would pass (the same figure as Retry-After, so
// the two fields never disagree, as draft-11 section 6 asks); otherwise until
// the limit is fully rested.
func resetSeconds(l *weirv1.LimitStatus) int64 {
	if !l.GetAllowed() && !l.GetTooCostly() {
		return retryAfterSeconds(l.GetRetryAfter())
	}
	return ceilSeconds(l.GetResetAfter())
}

// retryAfterSeconds is a denial's wait in whole seconds, rounded up and at
// least 1: "Retry-After: 0" would invite an immediate, doomed retry.
func retryAfterSeconds(d *durationpb.Duration) int64 {
	return max(1, ceilSeconds(d))
}

// ceilSeconds rounds a duration up to whole seconds; nil, zero and negative
// durations give 0. It saturates rather than overflow.
func ceilSeconds(d *durationpb.Duration) int64 {
	dur := d.AsDuration() // a nil Duration is zero
	if dur <= 0 {
		return 0
	}
	s := int64(dur / time.Second)
	if dur%time.Second != 0 {
		s++
	}
	return s
}

// sfInteger formats n as a Structured Field Integer, clamped to the
// non-negative range the draft allows for q, w, r and t.
func sfInteger(n int64) string {
	return strconv.FormatInt(min(max(n, 0), maxSFInteger), 10)
}

// sfString serializes s as a Structured Field String (RFC 8941, section
// 4.1.6): quoted, with '"' and '\' escaped. Bytes outside printable ASCII
// cannot be carried: each such character (or invalid byte) becomes '?'.
func sfString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteRune(c)
		case c < 0x20 || c > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
