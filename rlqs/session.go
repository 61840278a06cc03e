package rlqs

import (
	"errors"
	"fmt"
	"math"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"

	"github.com/weirhq/weir/policy"
)

// Errors a report can end its stream with. Nothing of the stream changes
// when a report is refused.
var (
	// ErrInvalidReport: the report is malformed (the message says what).
	ErrInvalidReport = errors.New("rlqs: invalid report")
	// ErrTooManyBuckets: the report would subscribe more than
	// Config.MaxBuckets buckets on its stream.
	ErrTooManyBuckets = errors.New("rlqs: too many buckets")
)

// slot is one of a stream's two lease holders on a bucket's key. Two, so
// that the lease backing the assignment in force stays open while the
// next one is asked for: the owner allows one open lease per holder and
// key, and a lease may only be settled once the Envoy can no longer spend
// it (see credit).
type slot struct {
	grantor string
	lease   uint64 // 0: the slot holds nothing
	units   int64
	expires int64      // the lease's end on this server: its request's send + TTL
	plan    bucketPlan // the assignment it backs; zero if none
	// assignedAt is when that assignment was sent; end when the Envoy
	// surely stopped spending under it (a later assignment or abandon
	// reached it, or it expired). Settle only at or after end.
	assignedAt, end int64
}

// bucket is one Envoy bucket on one stream.
type bucket struct {
	id    *rlqsv3.BucketId
	res   resolution
	kinds kind
	// demand is requests per second (allowed + denied) from the reports,
	// smoothed; lastReport when the last report of it arrived; busyAt
	// the last report with any request.
	demand             float64
	lastReport, busyAt int64
	slots              [2]slot
	cur                int        // the slot backing the token bucket in force, -1 none
	plan               bucketPlan // that token bucket
	assignedAt, life   int64      // when it was sent, and its TTL
	denyUntil, nextTry int64
	allowAt            int64 // when the last ALLOW_ALL was sent
	gone               bool  // abandoned; its slots await settling
	finished           bool  // its stranded units are counted
	// asked is the units the last renewal asked for; full says the owner
	// granted them all.
	asked int64
	full  bool
	// leased, returned and allowed are this bucket's units, for the
	// stranded count when it is finished.
	leased, returned, allowed int64
}

// session is one stream's state. It does no I/O and reads no clock: the
// server's loop owns it and passes times (nanoseconds on the server's
// monotonic clock) in. Not safe for concurrent use.
type session struct {
	cfg     Config
	holders [2]string
	domain  string
	buckets map[string]*bucket
	gone    []*bucket // abandoned buckets whose leases are not settled yet
	seq     uint64
	m       *metrics
	// notice, if set, hears of every bucket the session subscribes (the
	// server logs the ones it cannot serve).
	notice func(resolution)
}

func newSession(cfg Config, name string, m *metrics) *session {
	return &session{cfg: cfg, holders: [2]string{name + "/a", name + "/b"}, buckets: map[string]*bucket{}, m: m}
}

// check refuses a report that cannot be applied whole.
func (s *session) check(in *rlqsv3.RateLimitQuotaUsageReports) error {
	us := in.GetBucketQuotaUsages()
	switch d := in.GetDomain(); {
	case d == "" || len(d) > MaxBytes:
		return fmt.Errorf("%w: domain must be 1 to %d bytes", ErrInvalidReport, MaxBytes)
	case s.domain != "" && d != s.domain:
		return fmt.Errorf("%w: domain %.64q differs from the stream's first, %.64q", ErrInvalidReport, d, s.domain)
	case len(us) > s.cfg.MaxReportBuckets:
		return fmt.Errorf("%w: %d bucket usages, the most is %d", ErrInvalidReport, len(us), s.cfg.MaxReportBuckets)
	}
	seen := make(map[string]bool, len(us))
	added := 0
	for i, u := range us {
		if err := checkBucketID(u.GetBucketId()); err != nil {
			return fmt.Errorf("%w: bucket_quota_usages[%d]: %w", ErrInvalidReport, i, err)
		}
		if u.GetNumRequestsAllowed() > MaxCount || u.GetNumRequestsDenied() > MaxCount {
			return fmt.Errorf("%w: bucket_quota_usages[%d]: counts over %d", ErrInvalidReport, i, int64(MaxCount))
		}
		k := bucketKey(u.GetBucketId())
		if seen[k] {
			return fmt.Errorf("%w: bucket_quota_usages[%d]: bucket reported twice", ErrInvalidReport, i)
		}
		seen[k] = true
		if s.buckets[k] == nil {
			added++
		}
	}
	if n := len(s.buckets) + added; n > s.cfg.MaxBuckets {
		return fmt.Errorf("%w: %d buckets on this stream, the most is %d", ErrTooManyBuckets, n, s.cfg.MaxBuckets)
	}
	return nil
}

// report applies a checked report at now: it subscribes new buckets and
// records demand. It returns the actions to send at once (ALLOW_ALL for
// buckets no limit governs); leased buckets are served by calls.
func (s *session) report(p *policy.Policy, in *rlqsv3.RateLimitQuotaUsageReports, now int64) ([]*rlqsv3.RateLimitQuotaResponse_BucketAction, error) {
	if err := s.check(in); err != nil {
		return nil, err
	}
	s.domain = in.GetDomain()
	var out []*rlqsv3.RateLimitQuotaResponse_BucketAction
	for _, u := range in.GetBucketQuotaUsages() {
		k := bucketKey(u.GetBucketId())
		b := s.buckets[k]
		n := float64(u.GetNumRequestsAllowed() + u.GetNumRequestsDenied())
		if b == nil {
			b = &bucket{id: u.GetBucketId(), cur: -1, lastReport: now, busyAt: now, demand: n}
			b.res = resolve(p, s.domain, b.id.GetBucket(), s.cfg.MinLeaseTTL().Nanoseconds())
			s.buckets[k] = b
			s.m.subscribed(b.res)
			if s.notice != nil {
				s.notice(b.res)
			}
			if b.res.kind == kindAllow {
				out = append(out, s.allow(b, now))
			}
		} else if dt := time.Duration(now - b.lastReport); dt > 0 {
			b.demand = (b.demand + n/dt.Seconds()) / 2
			b.lastReport = now
		}
		if n > 0 {
			b.busyAt = now
		}
		if b.res.kind == kindLeased && b.cur >= 0 {
			// Admitted under a token bucket (roughly: the report spans the
			// interval before now): for the stranded count.
			b.allowed += int64(u.GetNumRequestsAllowed())
		}
		s.m.usage(b.res.label, u.GetNumRequestsAllowed(), u.GetNumRequestsDenied())
	}
	return out, nil
}

// allow is the ALLOW_ALL action for b at now.
func (s *session) allow(b *bucket, now int64) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	b.allowAt = now
	s.m.assigned(b.res.label, "allow")
	return blanket(b.id, true, s.cfg.AllowTTL)
}

// tick re-sends ALLOW_ALL before it expires (re-resolving the bucket
// against p, which may now govern it) and abandons idle buckets.
func (s *session) tick(p *policy.Policy, now int64) []*rlqsv3.RateLimitQuotaResponse_BucketAction {
	var out []*rlqsv3.RateLimitQuotaResponse_BucketAction
	for k, b := range s.buckets {
		switch {
		case now-b.busyAt >= s.cfg.IdleAfter.Nanoseconds():
			out = append(out, s.abandon(k, b, now))
		case b.res.kind == kindAllow && now-b.allowAt >= s.cfg.AllowTTL.Nanoseconds()/2:
			if r := resolve(p, s.domain, b.id.GetBucket(), s.cfg.MinLeaseTTL().Nanoseconds()); r.kind != kindAllow {
				s.m.unsubscribed(b.res)
				b.res = r
				s.m.subscribed(r)
				continue // the policy now governs it: served from the next calls
			}
			out = append(out, s.allow(b, now))
		}
	}
	return out
}

// abandon tells the Envoy to forget b; its leases are settled once the
// abandon has surely reached it.
func (s *session) abandon(k string, b *bucket, now int64) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	delete(s.buckets, k)
	s.m.unsubscribed(b.res)
	s.m.assigned(b.res.label, "abandon")
	s.stop(b, now)
	b.gone = true
	if b.slots[0].lease != 0 || b.slots[1].lease != 0 {
		s.gone = append(s.gone, b)
	} else {
		s.finish(b)
	}
	return &rlqsv3.RateLimitQuotaResponse_BucketAction{BucketId: b.id,
		BucketAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_AbandonAction_{AbandonAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_AbandonAction{}}}
}

// stop ends the token bucket in force: a message sent at now replaces it.
func (s *session) stop(b *bucket, now int64) {
	if b.cur >= 0 {
		c := &b.slots[b.cur]
		c.end = min(c.end, now+s.cfg.Delivery.Nanoseconds())
		b.cur = -1
	}
}

// finish counts what b's leases stranded: units leased that were neither
// returned nor admitted by the Envoy (as its reports say).
func (s *session) finish(b *bucket) {
	if b.res.kind == kindLeased && !b.finished {
		b.finished = true
		s.m.stranded(b.res.label, max(0, b.leased-b.returned-b.allowed))
	}
}

// close ends the stream at now: every lease still held strands (the
// Envoy keeps its assignments until they expire) and is counted.
func (s *session) close() {
	for _, b := range s.buckets {
		s.m.unsubscribed(b.res)
		s.release(b)
		s.finish(b)
	}
	for _, b := range s.gone {
		s.release(b)
		s.finish(b)
	}
	s.buckets, s.gone = nil, nil
}

func (s *session) release(b *bucket) {
	for i := range b.slots {
		if b.slots[i].lease != 0 {
			s.m.held(b.res.label, -b.slots[i].units)
			b.slots[i] = slot{}
		}
	}
}

// life is the TTL an assignment backed by a lease ending at expires can
// have when sent at now: whole seconds, at most AssignTTL, ending
// Delivery before the lease.
func (s *session) life(expires, now int64) int64 {
	d := time.Duration(expires-now) - s.cfg.Delivery
	return min(s.cfg.AssignTTL, d.Truncate(time.Second)).Nanoseconds()
}

// want is the plan b's demand asks for and the units that back it for
// a whole assignment.
func (s *session) want(b *bucket) (bucketPlan, int64) {
	rate := int64(math.Ceil(b.demand))
	p := bucketPlan{Rate: max(rate, 1), Max: max(1, int64(math.Ceil(float64(rate)*s.cfg.Burst.Seconds())))}
	ttl := b.res.ref.Terms.TTL
	life := min(s.cfg.AssignTTL, (ttl - s.cfg.Delivery - s.cfg.RPCTimeout).Truncate(time.Second))
	return p, p.covers(life + s.cfg.Delivery)
}

func blanket(id *rlqsv3.BucketId, allow bool, ttl time.Duration) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	return assignment(id, ttl, blanketStrategy(allow))
}
