package lease

import (
	"fmt"
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
// when one unit fits, or, for a saturated key, one smoothed round trip
// before, so that the answer arrives about when the denial ends. An
// answer that comes early is a shorter denial, never a wrong one.
func (h *Holder) askAt(k *held) int64 {
	if k.saturated {
		return k.deniedUntil - h.rtt[k.ref.Owner]
	}
	return k.deniedUntil
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
		it := Request{Peer: h.cfg.Name, Group: k.ref.Group, Key: key, Limit: k.ref.Limit, Terms: k.ref.Terms, Label: k.ref.Label}
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

// observe folds a refresh round trip to owner into its smoothed estimate
// (gain 1/8, as TCP's).
func (h *Holder) observe(owner string, rtt int64) {
	if old, ok := h.rtt[owner]; ok {
		rtt = old + (rtt-old)/8
	}
	h.rtt[owner] = max(rtt, 0)
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

// Sweep writes off leases that ended at or before now and forgets keys that
// hold nothing, have no refresh in flight and saw no request for IdleAfter.
func (h *Holder) Sweep(now int64) {
	idle := h.cfg.IdleAfter.Nanoseconds()
	for key, k := range h.keys {
		h.expire(k, now)
		if k.lease == 0 && h.inflight[k.ref.Owner] == nil && now-k.seen >= idle {
			delete(h.keys, key)
		}
	}
}
