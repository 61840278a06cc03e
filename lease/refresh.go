package lease

import (
	"fmt"
	"maps"
	"math"
	"slices"
)

// wants reports whether k's demand over one TTL is worth a lease.
func (h *Holder) wants(k *held, now int64) bool {
	return h.demand(k, now)*k.ref.Terms.TTL.Seconds() >= h.cfg.MinUnits
}

// asks reports whether k, holding no lease, should ask for one at now: it
// wants one and the owner's last denial (see askAt), cap or busy answer
// has passed.
func (h *Holder) asks(k *held, now int64) bool {
	return h.wants(k, now) && now >= h.askAt(k) && now >= k.quietUntil
}

// askAt is when k may ask its owner again after the owner's last denial:
// when one unit fits, or, for a saturated key, the shortest recent round
// trip to its owner before (see roundTrips), so that the probe reaches the
// owner about when the unit fits there and its answer arrives about when
// the denial ends here.
func (h *Holder) askAt(k *held) int64 {
	if k.saturated {
		return k.deniedUntil - h.rtt[k.ref.Owner].shortest()
	}
	return k.deniedUntil
}

// rttWindow is how many of an owner's latest refresh round trips
// roundTrips keeps.
const rttWindow = 16

// roundTrips are an owner's latest refresh round trips. A saturated key's
// probe is sent the shortest of them before the owner's denial ends, not
// an average: a probe that reaches the owner before the unit fits is
// answered with a denial that ends when the old one did, so the next probe
// leaves only then and the requests after that moment wait a whole round
// trip; one that reaches it a little late makes them wait only the
// difference. On a loaded machine round trips have a long tail, which
// pulls an average above most of them: timed by the smoothed round trip,
// most probes of a 100/s key arrived early (1.3 to 1.5 probes per unit,
// docs/benchmarks.md).
type roundTrips struct {
	last [rttWindow]int64
	n    int // round trips observed
}

// shortest returns the shortest round trip kept, 0 for none (or a nil r).
func (r *roundTrips) shortest() int64 {
	if r == nil || r.n == 0 {
		return 0
	}
	m := r.last[0]
	for _, v := range r.last[1:min(r.n, rttWindow)] {
		m = min(m, v)
	}
	return m
}

// due reports whether k needs a refresh at now: its lease is close to its
// end or used up while demand remains, or it has none and asks for one.
func (h *Holder) due(k *held, now int64) bool {
	if k.lease != 0 && now < k.expires {
		left := float64(k.expires - now)
		// Used up: ask again once the owner's last answer lets one unit
		// fit (a grant at the key's edge says when).
		return left <= h.cfg.RefreshWhenLeft*float64(k.ref.Terms.ttlNanos()) ||
			(k.units == 0 && h.wants(k, now) && now >= h.askAt(k))
	}
	return h.asks(k, now)
}

// Due returns, sorted, the owners to which a refresh should be sent at now:
// those with no refresh in flight and at least one key that needs one.
func (h *Holder) Due(now int64) []string {
	var owners []string
	for _, k := range h.keys {
		h.expire(k, now)
		o := k.ref.Owner
		if h.inflight[o] == nil && !slices.Contains(owners, o) && h.due(k, now) {
			owners = append(owners, o)
		}
	}
	slices.Sort(owners)
	return owners
}

// Refresh builds the refresh to owner at now, the moment it is sent: one
// item for every key owned by owner that holds a lease (its unspent units
// go back and can no longer be spent) or wants one. It returns false when a
// refresh to owner is already in flight or there is nothing to send. The
// caller sends it and passes the reply to Apply, or calls Abandon if no
// reply comes.
func (h *Holder) Refresh(owner string, now int64) (Refresh, bool) {
	return h.refresh(owner, now, func(k *held) bool { return k.lease != 0 || h.asks(k, now) })
}

// Probe is Refresh for a request that Spend answered Await: it carries
// only the keys of owner that are due, so that refreshing a saturated key
// between ticks does not return and re-grant the owner's other leases.
func (h *Holder) Probe(owner string, now int64) (Refresh, bool) {
	return h.refresh(owner, now, func(k *held) bool { return h.due(k, now) })
}

// InFlight reports whether a refresh to owner awaits its reply.
func (h *Holder) InFlight(owner string) bool { return h.inflight[owner] != nil }

func (h *Holder) refresh(owner string, now int64, include func(*held) bool) (Refresh, bool) {
	if h.inflight[owner] != nil {
		return Refresh{}, false
	}
	var keys []string
	for key, k := range h.keys {
		h.expire(k, now)
		if k.ref.Owner == owner && include(k) {
			keys = append(keys, key)
		}
	}
	if len(keys) == 0 {
		return Refresh{}, false
	}
	slices.Sort(keys)
	h.seq++
	p := &pending{seq: h.seq, sent: now, keys: keys, returned: make(map[string]int64)}
	r := Refresh{Owner: owner, Seq: h.seq, Items: make([]Request, len(keys))}
	for i, key := range keys {
		k := h.keys[key]
		k.refreshing = true
		it := Request{Peer: h.cfg.Name, Group: k.ref.Group, Key: key, Limit: k.ref.Limit, Terms: k.ref.Terms, Label: k.ref.Label, Scheduled: true}
		if h.wants(k, now) {
			it.Demand = h.demand(k, now)
		}
		if k.lease != 0 {
			it.Return = Return{Grantor: k.grantor, Lease: k.lease, Unspent: k.units}
			p.returned[k.ref.Label] += k.units
			h.stat(k.ref.Label).ReturnedUnits += k.units
			k.units, k.lease = 0, 0
		}
		r.Items[i] = it
	}
	h.inflight[owner] = p
	return r, true
}

// Apply takes the owner's reply to the latest refresh sent to it, received
// at now. Grants become spendable until the refresh's send time plus their
// TTL; denials are remembered from now. A reply to any other refresh (an
// abandoned or superseded one) is ignored and Apply returns false: its
// grants strand at the owner, which writes them off when they expire. A
// reply whose answers do not match the refresh's items is an error; the
// refresh is then abandoned.
func (h *Holder) Apply(r Reply, now int64) (bool, error) {
	p := h.inflight[r.Owner]
	if p == nil || p.seq != r.Seq {
		h.ignored++
		return false, nil
	}
	delete(h.inflight, r.Owner)
	h.settle(p)
	h.observe(r.Owner, now-p.sent)
	if len(r.Answers) != len(p.keys) {
		h.failing[r.Owner] = true
		h.lose(p)
		return false, fmt.Errorf("%w: reply from %s has %d answers for %d items", ErrInvalidRequest, r.Owner, len(r.Answers), len(p.keys))
	}
	delete(h.failing, r.Owner)
	for i, a := range r.Answers {
		k := h.keys[p.keys[i]]
		if k == nil {
			continue // forgotten meanwhile: a grant strands at the owner
		}
		switch a.Outcome {
		case Granted:
			k.units, k.grantor, k.lease, k.expires = a.Units, a.Grantor, a.Lease, p.sent+a.TTL
			// A scheduled grant's times count from the answer's arrival,
			// after the owner decided: never a unit before its time.
			k.nextAt, k.spacing = math.MinInt64, 0 // all of it at once, whatever the caller's now
			if a.Spacing > 0 {
				k.nextAt, k.spacing = now+a.Start, a.Spacing
			}
			k.deniedUntil, k.quietUntil, k.saturated = 0, 0, a.RetryAfter > 0
			if k.saturated {
				k.deniedUntil = now + a.RetryAfter
			}
			h.stat(k.ref.Label).ReceivedUnits += a.Units
		case Denied:
			k.deniedUntil, k.saturated = now+a.RetryAfter, true
		case Capped, Busy:
			quiet := int64(h.cfg.RefreshWhenLeft * float64(k.ref.Terms.ttlNanos()))
			if a.RetryAfter > 0 {
				quiet = min(quiet, a.RetryAfter)
			}
			k.quietUntil = now + quiet
		}
	}
	return true, nil
}

// observe keeps a refresh round trip to owner, in place of the oldest one
// kept.
func (h *Holder) observe(owner string, rtt int64) {
	r := h.rtt[owner]
	if r == nil {
		r = &roundTrips{}
		h.rtt[owner] = r
	}
	r.last[r.n%rttWindow] = max(rtt, 0)
	r.n++
}

// Abandon gives up on refresh seq to owner (the call failed or timed out):
// a reply to it will be ignored, and the units it returned strand at the
// owner until their leases expire there. Until a later refresh to owner is
// answered, Spend forwards where it would have answered Await.
func (h *Holder) Abandon(owner string, seq uint64) {
	if p := h.inflight[owner]; p != nil && p.seq == seq {
		h.failing[owner] = true
		h.settle(p)
		h.lose(p)
		delete(h.inflight, owner)
	}
}

// settle marks the keys refresh p carried as no longer awaiting it.
func (h *Holder) settle(p *pending) {
	for _, key := range p.keys {
		if k := h.keys[key]; k != nil {
			k.refreshing = false
		}
	}
}

// lose counts the units p returned as lost.
func (h *Holder) lose(p *pending) {
	for label, n := range p.returned {
		h.stat(label).LostUnits += n
	}
}

// Sweep writes off leases that ended at or before now, forgets keys that
// hold nothing, have no refresh in flight and saw no request for IdleAfter,
// and forgets what it knew of owners no remaining key names.
func (h *Holder) Sweep(now int64) {
	idle := h.cfg.IdleAfter.Nanoseconds()
	owners := make(map[string]bool)
	for key, k := range h.keys {
		h.expire(k, now)
		if k.lease == 0 && h.inflight[k.ref.Owner] == nil && now-k.seen >= idle {
			delete(h.keys, key)
		} else {
			owners[k.ref.Owner] = true
		}
	}
	// Owners no key names any more (nodes that left) lose their round
	// trips and failure marks, so node churn does not accumulate them.
	gone := func(o string) bool { return !owners[o] && h.inflight[o] == nil }
	maps.DeleteFunc(h.rtt, func(o string, _ *roundTrips) bool { return gone(o) })
	maps.DeleteFunc(h.failing, func(o string, _ bool) bool { return gone(o) })
}
