package rlqstest

import (
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// FilterConfig is the part of Envoy's rate_limit_quota filter settings
// the emulation honours.
type FilterConfig struct {
	// Domain is sent in every report.
	Domain string
	// ReportingInterval is bucket_settings.reporting_interval: every
	// cached bucket is reported this often.
	ReportingInterval time.Duration
	// NoAssignmentAllow is no_assignment_behavior.fallback_rate_limit's
	// blanket rule: true ALLOW_ALL, false DENY_ALL. It decides a bucket's
	// requests before any assignment arrives and after one expires.
	NoAssignmentAllow bool
	// Expired, when set, is expired_assignment_behavior: a blanket rule
	// applied for Expired.TTL after an assignment expires, then the
	// no-assignment behaviour.
	Expired *Fallback
}

// Fallback is a blanket expired_assignment_behavior.
type Fallback struct {
	Allow bool
	TTL   time.Duration
}

// Filter decides requests as Envoy's rate_limit_quota filter does, from
// the assignments an RLQS server sends (source files read: see
// docs/envoy.md, "What Envoy does"). It does no I/O and reads no clock:
// times are nanoseconds on the Envoy's monotonic clock. Not safe for
// concurrent use; Client wraps it for a real stream.
type Filter struct {
	cfg     FilterConfig
	buckets map[string]*fbucket
}

type fbucket struct {
	id               *rlqsv3.BucketId
	allowed, denied  uint64
	action           *rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction // nil: none
	expires          int64                                                             // when action ends
	fallbackUntil    int64                                                             // > 0: the expired fallback is in force until then
	tb               *tokenBucket
	lastReport, born int64
}

// NewFilter returns a filter with no buckets.
func NewFilter(cfg FilterConfig) *Filter { return &Filter{cfg: cfg, buckets: map[string]*fbucket{}} }

func key(id map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(id)) {
		b.WriteString(k + "\x00" + id[k] + "\x01")
	}
	return b.String()
}

// Request decides one request of bucket id at now. The first request of a
// bucket creates it, is decided by the no-assignment behaviour and comes
// with the immediate report Envoy sends for a new bucket (nil otherwise).
func (f *Filter) Request(id map[string]string, now int64) (allowed bool, first *rlqsv3.RateLimitQuotaUsageReports) {
	k := key(id)
	b := f.buckets[k]
	if b == nil {
		b = &fbucket{id: &rlqsv3.BucketId{Bucket: maps.Clone(id)}, lastReport: now, born: now}
		f.buckets[k] = b
		allowed = f.cfg.NoAssignmentAllow
		b.count(allowed)
		return allowed, f.reports(now, b)
	}
	allowed = f.decide(b, now)
	b.count(allowed)
	return allowed, nil
}

func (b *fbucket) count(allowed bool) {
	if allowed {
		b.allowed++
	} else {
		b.denied++
	}
}

// decide applies b's action in force at now.
func (f *Filter) decide(b *fbucket, now int64) bool {
	f.expire(b, now)
	switch {
	case b.action != nil && b.tb != nil:
		return b.tb.consume(now)
	case b.action != nil:
		return b.action.GetRateLimitStrategy().GetBlanketRule() == typev3.RateLimitStrategy_ALLOW_ALL
	case b.fallbackUntil > now:
		return f.cfg.Expired.Allow
	}
	return f.cfg.NoAssignmentAllow
}

// expire ends b's assignment once its TTL passed: the expired fallback
// follows if configured, then nothing (no-assignment behaviour).
func (f *Filter) expire(b *fbucket, now int64) {
	if b.action == nil || now < b.expires {
		return
	}
	b.action, b.tb = nil, nil
	if f.cfg.Expired != nil {
		b.fallbackUntil = b.expires + f.cfg.Expired.TTL.Nanoseconds()
	}
}

// Report returns the periodic report of every bucket at now and resets
// their counts, as Envoy's reporting timer does.
func (f *Filter) Report(now int64) *rlqsv3.RateLimitQuotaUsageReports {
	bs := slices.Collect(maps.Values(f.buckets))
	return f.reports(now, bs...)
}

func (f *Filter) reports(now int64, bs ...*fbucket) *rlqsv3.RateLimitQuotaUsageReports {
	out := &rlqsv3.RateLimitQuotaUsageReports{Domain: f.cfg.Domain}
	for _, b := range bs {
		out.BucketQuotaUsages = append(out.BucketQuotaUsages, &rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
			BucketId: b.id, NumRequestsAllowed: b.allowed, NumRequestsDenied: b.denied,
			// Envoy sends the elapsed time in whole seconds.
			TimeElapsed: durationpb.New(time.Duration(now - b.lastReport).Truncate(time.Second)),
		})
		b.allowed, b.denied, b.lastReport = 0, 0, now
	}
	return out
}

// Apply applies a response that arrived at now. A token bucket equal to
// the one in force (max_tokens, tokens_per_fill and fill_interval's nanos,
// as Envoy compares them) keeps its state; its TTL restarts either way.
// An abandon forgets the bucket. Actions for unknown buckets are ignored.
func (f *Filter) Apply(resp *rlqsv3.RateLimitQuotaResponse, now int64) {
	for _, a := range resp.GetBucketAction() {
		b := f.buckets[key(a.GetBucketId().GetBucket())]
		if b == nil {
			continue
		}
		if a.GetAbandonAction() != nil {
			delete(f.buckets, key(b.id.GetBucket()))
			continue
		}
		qa := a.GetQuotaAssignmentAction()
		if qa == nil {
			continue
		}
		f.expire(b, now)
		st := qa.GetRateLimitStrategy()
		var tb *tokenBucket
		switch {
		case st.GetTokenBucket() != nil:
			tb = b.tb
			if b.action == nil || !sameBucket(b.action.GetRateLimitStrategy().GetTokenBucket(), st.GetTokenBucket()) {
				tb = newTokenBucket(st.GetTokenBucket(), now)
			}
		case st.GetRequestsPerTimeUnit() != nil:
			continue // Envoy logs it as unsupported and keeps what it had
		}
		b.action, b.tb, b.fallbackUntil = qa, tb, 0
		// Envoy starts the expiry timer from the TTL's seconds only.
		b.expires = now + (time.Duration(qa.GetAssignmentTimeToLive().GetSeconds()) * time.Second).Nanoseconds()
	}
}

func sameBucket(a, b *typev3.TokenBucket) bool {
	return a != nil && b != nil && a.GetMaxTokens() == b.GetMaxTokens() &&
		a.GetTokensPerFill().GetValue() == b.GetTokensPerFill().GetValue() &&
		a.GetFillInterval().GetNanos() == b.GetFillInterval().GetNanos()
}

// Buckets returns how many buckets the filter caches.
func (f *Filter) Buckets() int { return len(f.buckets) }

// tokenBucket is Envoy's atomic token bucket: full when created, filled
// continuously at rate tokens a second up to max. Like Envoy's, it keeps
// the time at which the bucket would have been empty; in integer
// nanoseconds here, so that whole tokens stay whole.
type tokenBucket struct {
	max, rate float64
	empty     int64
}

func newTokenBucket(tb *typev3.TokenBucket, now int64) *tokenBucket {
	// The fill rate is tokens_per_fill over the fill interval in whole
	// seconds; under a second divides by zero (an always-full bucket).
	rate := math.Inf(1)
	if s := tb.GetFillInterval().AsDuration().Truncate(time.Second).Seconds(); s > 0 {
		rate = float64(tb.GetTokensPerFill().GetValue()) / s
	}
	t := &tokenBucket{max: float64(tb.GetMaxTokens()), rate: max(rate, 1e-9)}
	t.empty = now - t.span(t.max)
	return t
}

// span is how long the bucket takes to fill n tokens, in nanoseconds.
func (t *tokenBucket) span(n float64) int64 {
	if math.IsInf(t.rate, 1) {
		return 0
	}
	return int64(math.Round(n * 1e9 / t.rate))
}

func (t *tokenBucket) consume(now int64) bool {
	tokens := t.max
	if !math.IsInf(t.rate, 1) {
		tokens = min(t.max, float64(now-t.empty)*t.rate/1e9)
	}
	if tokens < 1 {
		return false
	}
	t.empty = now - t.span(tokens-1)
	return true
}
