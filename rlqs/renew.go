package rlqs

import (
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/weirhq/weir/lease"
)

// call is one lease refresh to send for one of the stream's two holders;
// item j is for buckets[j].
type call struct {
	slot    int
	holder  string
	refresh lease.Refresh
	buckets []*bucket
}

// calls returns the lease refreshes due at now: renewals of leased
// buckets whose assignment is due (or that have none), and returns of
// abandoned buckets' leases whose assignments surely ended. A return is
// given up when it is put in a call, whatever happens to the call: the
// units are no longer the stream's.
func (s *session) calls(now int64) []call {
	var cs [2]call
	for i := range cs {
		cs[i].slot, cs[i].holder = i, s.holders[i]
	}
	for _, b := range s.buckets {
		if i, ok := s.due(b, now); ok {
			_, units := s.want(b)
			b.asked = units
			it := b.res.ref
			it.Peer, it.Demand = s.holders[i], float64(units)/it.Terms.TTL.Seconds()
			it.Return = s.giveUp(b, i)
			cs[i].add(it, b)
			continue
		}
		// Settle a lease as soon as the Envoy surely stopped spending it:
		// waiting for the slot's next renewal would let it expire first
		// and strand what it had left.
		for i := range b.slots {
			if sl := b.slots[i]; b.res.kind == kindLeased && i != b.cur && sl.lease != 0 && now >= sl.end {
				it := b.res.ref
				it.Peer, it.Return = s.holders[i], s.giveUp(b, i)
				cs[i].add(it, b)
			}
		}
	}
	kept := s.gone[:0]
	for _, b := range s.gone {
		for i := range b.slots {
			if b.slots[i].lease != 0 && now >= b.slots[i].end {
				it := b.res.ref
				it.Peer, it.Return = s.holders[i], s.giveUp(b, i)
				cs[i].add(it, b)
			}
		}
		if b.slots[0].lease != 0 || b.slots[1].lease != 0 {
			kept = append(kept, b)
		}
	}
	s.gone = kept
	var out []call
	for _, c := range cs {
		if len(c.buckets) > 0 {
			s.seq++
			c.refresh.Seq = s.seq
			out = append(out, c)
		}
	}
	return out
}

func (c *call) add(it lease.Request, b *bucket) {
	c.refresh.Items = append(c.refresh.Items, it)
	c.buckets = append(c.buckets, b)
}

// due reports whether b should get a new lease at now, and in which slot:
// the one not backing the assignment in force, once the assignment it
// backed surely ended. A bucket is due with no assignment in force once
// its last refusal has passed; with one, Renew after it was sent (capped
// so that the renewal lands before the assignment expires), or earlier
// when demand outgrew its rate.
func (s *session) due(b *bucket, now int64) (int, bool) {
	if b.res.kind != kindLeased || b.demand <= 0 || now < b.nextTry {
		return 0, false
	}
	for i := range b.slots {
		if sl := b.slots[i]; sl.lease != 0 && now >= sl.expires && now >= sl.end {
			s.giveUp(b, i) // expired at the owner too: nothing to return
		}
	}
	i := 0
	if b.cur == 0 || (b.cur < 0 && b.slots[0].lease != 0 && now < b.slots[0].end) {
		i = 1
	}
	if o := b.slots[i]; o.lease != 0 && now < o.end {
		return 0, false
	}
	if b.cur < 0 {
		return i, true
	}
	c := s.cfg
	renew := min(c.Renew, time.Duration(b.life)-c.Delivery-c.RPCTimeout-c.Tick)
	// Early only when the owner gave all that was asked last time: a
	// renewal writes off Delivery + Burst of rate, so renewing a bucket
	// the limit holds back would only waste units.
	grown := b.full && b.demand > 1.25*float64(b.plan.Rate)+1 && now >= b.assignedAt+(c.Renew/4).Nanoseconds()
	return i, now >= b.assignedAt+renew.Nanoseconds() || grown
}

// giveUp empties slot i of b and returns its lease's return: the units the
// Envoy surely did not spend under it (credit).
func (s *session) giveUp(b *bucket, i int) lease.Return {
	sl := b.slots[i]
	if sl.lease == 0 {
		return lease.Return{}
	}
	b.slots[i] = slot{}
	s.m.held(b.res.label, -sl.units)
	return lease.Return{Grantor: sl.grantor, Lease: sl.lease, Unspent: credit(sl.units, sl.plan, sl.assignedAt, sl.end)}
}

// apply applies the owners' answers to c, sent at sent and arrived at
// now, and returns the actions to send. err means no answer arrived:
// nothing was granted and the returns are lost (they strand at the
// owners).
func (s *session) apply(c call, answers []lease.Answer, err error, sent, now int64) []*rlqsv3.RateLimitQuotaResponse_BucketAction {
	s.m.call(err)
	var out []*rlqsv3.RateLimitQuotaResponse_BucketAction
	for j, b := range c.buckets {
		a := lease.Answer{Outcome: lease.Busy}
		if err == nil && j < len(answers) {
			a = answers[j]
		}
		b.returned += a.Credited
		s.m.returned(b.res.label, a.Credited)
		if b.gone {
			if a.Outcome == lease.Granted { // asked for nothing: cannot happen; give it back
				b.slots[c.slot] = slot{grantor: a.Grantor, lease: a.Lease, units: a.Units, assignedAt: now, end: now}
				b.leased += a.Units
				s.m.held(b.res.label, a.Units)
				s.gone = append(s.gone, b)
			} else if b.slots[0].lease == 0 && b.slots[1].lease == 0 {
				s.finish(b)
			}
			continue
		}
		if act := s.answer(b, c.slot, a, sent, now); act != nil {
			out = append(out, act)
		}
	}
	return out
}

// answer applies one answer for b's slot i.
func (s *session) answer(b *bucket, i int, a lease.Answer, sent, now int64) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	if a.Outcome == lease.Granted {
		sl := slot{grantor: a.Grantor, lease: a.Lease, units: a.Units, expires: sent + a.TTL, assignedAt: now, end: now}
		b.slots[i] = sl
		b.leased += a.Units
		b.full = a.Units >= b.asked
		s.m.leased(b.res.label, a.Units)
		if act := s.assign(b, i, now); act != nil {
			return act
		}
		a = lease.Answer{Outcome: lease.Busy} // too few units or too late: treat as a refusal
	}
	if a.Outcome == lease.Settled {
		return nil
	}
	retry := max(a.RetryAfter, s.cfg.Tick.Nanoseconds())
	b.nextTry = now + retry
	if b.cur >= 0 && b.assignedAt+b.life > b.nextTry+s.cfg.RPCTimeout.Nanoseconds()+s.cfg.Delivery.Nanoseconds() {
		return nil // the assignment in force outlives the wait: ask again then
	}
	// Envoy reads whole seconds: the deny lasts the wait rounded up, and
	// the stream asks again before it lapses.
	ttl := min(s.cfg.MaxDenyTTL, max(time.Second, (time.Duration(retry)+time.Second-1).Truncate(time.Second)))
	b.nextTry = now + min(retry, (ttl-s.cfg.RPCTimeout-s.cfg.Tick).Nanoseconds())
	if b.denyUntil > now+s.cfg.RPCTimeout.Nanoseconds()+s.cfg.Tick.Nanoseconds() {
		return nil // a deny is in force past the next try
	}
	s.stop(b, now)
	b.denyUntil = now + ttl.Nanoseconds()
	s.m.assigned(b.res.label, "deny")
	return blanket(b.id, false, ttl)
}

// assign turns slot i's fresh lease into b's token bucket, or returns nil
// when the lease cannot back one (fewer units than a token a second over
// the assignment's life, or a life under a second).
func (s *session) assign(b *bucket, i int, now int64) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	sl := &b.slots[i]
	life := s.life(sl.expires, now)
	if life < time.Second.Nanoseconds() {
		return nil
	}
	span := time.Duration(life) + s.cfg.Delivery
	want, _ := s.want(b)
	p := b.plan
	// Re-send the plan in force unchanged when the lease carries it and
	// it is within 10% of demand: Envoy then keeps its bucket and only
	// extends the TTL.
	keep := b.cur >= 0 && p.covers(span) <= sl.units && float64(p.Rate) >= 0.9*float64(want.Rate) && float64(p.Rate) <= 1.1*float64(want.Rate)+1
	if !keep {
		var ok bool
		if p, ok = fit(sl.units, span, s.cfg.Burst, want.Rate); !ok {
			return nil
		}
	}
	changed := b.cur < 0 || p != b.plan
	s.stop(b, now)
	sl.plan, sl.assignedAt, sl.end = p, now, now+span.Nanoseconds()
	b.cur, b.plan, b.assignedAt, b.life, b.denyUntil = i, p, now, life, 0
	kind := "token_bucket"
	if !changed {
		kind = "token_bucket_unchanged"
	}
	s.m.assigned(b.res.label, kind)
	return assignment(b.id, time.Duration(life), tokenStrategy(p))
}

func assignment(id *rlqsv3.BucketId, ttl time.Duration, st *typev3.RateLimitStrategy) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	return &rlqsv3.RateLimitQuotaResponse_BucketAction{BucketId: id,
		BucketAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{
			QuotaAssignmentAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
				AssignmentTimeToLive: durationpb.New(ttl), RateLimitStrategy: st,
			}}}
}

func blanketStrategy(allow bool) *typev3.RateLimitStrategy {
	r := typev3.RateLimitStrategy_DENY_ALL
	if allow {
		r = typev3.RateLimitStrategy_ALLOW_ALL
	}
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: r}}
}

func tokenStrategy(p bucketPlan) *typev3.RateLimitStrategy {
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_TokenBucket{TokenBucket: &typev3.TokenBucket{
		MaxTokens: uint32(p.Max), TokensPerFill: wrapperspb.UInt32(uint32(p.Rate)), FillInterval: durationpb.New(time.Second),
	}}}
}
