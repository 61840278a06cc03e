package client

import (
	"errors"
	"fmt"
	"time"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/lease"
)

// apply takes the answer to a request: lookups first (so that a policy
// change is seen), then the refresh's grants. A malformed answer breaks
// the stream.
func (l *leaser) apply(resp *weirv1.HoldResponse, r lease.Refresh, ok bool, lookups []*entry) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.wakeLocked()
	if len(resp.GetLookups()) != len(lookups) {
		l.abandonLocked(r, ok, lookups)
		return fmt.Errorf("client: leases: %d lookup answers for %d lookups", len(resp.GetLookups()), len(lookups))
	}
	v := resp.GetPolicyVersion()
	for i, e := range lookups {
		e.queued = false
		l.learnLocked(e, resp.GetLookups()[i], v)
	}
	if v != l.version {
		l.version = v
		for _, e := range l.entries {
			if e.version != v && e.state != looking {
				l.queueLocked(e) // look again under the new policy; meanwhile as before
			}
		}
	}
	if !ok || l.h == nil {
		return nil
	}
	reply, err := l.replyLocked(resp, r)
	if err != nil {
		l.abandonLocked(r, ok, nil)
		return err
	}
	if _, err := l.h.Apply(reply, l.now()); err != nil {
		return fmt.Errorf("client: leases: %w", err)
	}
	return nil
}

func (l *leaser) abandonLocked(r lease.Refresh, ok bool, lookups []*entry) {
	if ok && l.h != nil {
		l.h.Abandon(leaseOwner, r.Seq)
	}
	for _, e := range lookups {
		e.queued = false
	}
}

// learnLocked records a lookup's answer in e.
func (l *leaser) learnLocked(e *entry, t *weirv1.LeaseTerms, version string) {
	e.version, e.reported = version, t.GetReason()
	if !t.GetLeasable() {
		e.state, e.refs, e.limits, e.windows = plain, nil, nil, nil
		return
	}
	refs, windows, ok := refsOf(t)
	if !ok {
		e.state, e.reported = plain, "unusable lease terms"
		return
	}
	e.state, e.refs, e.limits, e.windows = leasable, refs, t.GetLimits(), windows
	for _, r := range refs {
		l.keyDesc[r.Key] = e.desc
	}
}

// errBadGrants is a refresh answer that does not match its items.
var errBadGrants = errors.New("client: leases: answer does not match the refresh")

// replyLocked turns the grants of resp into the holder's Reply to r: one
// answer per item, Busy for an item that was not sent (see buildLocked)
// and for one the node says is no longer leasable, whose descriptor sets
// are then looked up again.
func (l *leaser) replyLocked(resp *weirv1.HoldResponse, r lease.Refresh) (lease.Reply, error) {
	grants := resp.GetGrants()
	reply := lease.Reply{Owner: leaseOwner, Seq: r.Seq, Answers: make([]lease.Answer, len(r.Items))}
	j := 0
	for i, it := range r.Items {
		reply.Answers[i] = lease.Answer{Outcome: lease.Busy}
		if l.keyDesc[it.Key] == nil {
			continue
		}
		if j >= len(grants) {
			return reply, errBadGrants
		}
		g := grants[j]
		j++
		if g.GetOutcome() == weirv1.LeaseGrant_NOT_LEASABLE {
			l.relookLocked(it.Key)
			continue
		}
		a, err := answerOf(g)
		if err != nil {
			return reply, err
		}
		reply.Answers[i] = a
	}
	if j != len(grants) {
		return reply, errBadGrants
	}
	return reply, nil
}

// relookLocked queues a lookup of every descriptor set leasing key.
func (l *leaser) relookLocked(key string) {
	for _, e := range l.entries {
		for _, r := range e.refs {
			if r.Key == key {
				l.queueLocked(e)
			}
		}
	}
}

// answerOf converts a grant to the holder's answer.
func answerOf(g *weirv1.LeaseGrant) (lease.Answer, error) {
	var a lease.Answer
	switch g.GetOutcome() {
	case weirv1.LeaseGrant_SETTLED:
		a.Outcome = lease.Settled
	case weirv1.LeaseGrant_GRANTED:
		a.Outcome = lease.Granted
	case weirv1.LeaseGrant_DENIED:
		a.Outcome = lease.Denied
	case weirv1.LeaseGrant_CAPPED:
		a.Outcome = lease.Capped
	case weirv1.LeaseGrant_BUSY:
		a.Outcome = lease.Busy
	default:
		return a, fmt.Errorf("%w: outcome %v", errBadGrants, g.GetOutcome())
	}
	a.Grantor, a.Lease, a.Units, a.TTL = g.GetGrantor(), g.GetLease(), g.GetUnits(), g.GetTtl().AsDuration().Nanoseconds()
	a.RetryAfter, a.Credited = g.GetRetryAfter().AsDuration().Nanoseconds(), g.GetCredited()
	if a.Outcome == lease.Granted && (a.Lease == 0 || a.Units < 1 || a.TTL <= 0) {
		return a, fmt.Errorf("%w: a grant of %d units of lease %d for %s", errBadGrants, a.Units, a.Lease, time.Duration(a.TTL))
	}
	return a, nil
}

// sweepLocked sweeps the holder and forgets descriptor sets unused for
// the holder's IdleAfter, and the keys no remaining set leases.
func (l *leaser) sweepLocked(now int64) {
	l.swept = now
	if l.h != nil {
		l.h.Sweep(now)
	}
	idle := l.cfg.Holder.IdleAfter.Nanoseconds()
	keep := make(map[string]map[string]string, len(l.keyDesc))
	for k, e := range l.entries {
		if now-e.seen >= idle && !e.queued {
			delete(l.entries, k)
			continue
		}
		for _, r := range e.refs {
			keep[r.Key] = e.desc
		}
	}
	// A key still leased keeps its descriptors until its lease ends, so
	// that its units can be returned.
	for k, d := range l.keyDesc {
		if keep[k] == nil && l.h != nil && l.h.Units(k, now) > 0 {
			keep[k] = d
		}
	}
	l.keyDesc = keep
}

// returnAll gives every unit held back to its owner in one last request
// (demand 0: nothing new is granted) and waits for its answer, within
// RefreshTimeout; Shutdown's context may cut it short by closing quit
// early, which it already is. Units it cannot return strand at their
// owners until their leases expire.
func (l *leaser) returnAll(st *stream) {
	l.mu.Lock()
	l.up.Store(false) // no new spends: the units are going back
	r, ok := l.h.Refresh(leaseOwner, l.now())
	if !ok {
		l.mu.Unlock()
		return
	}
	req := &weirv1.HoldRequest{Seq: st.seq + 1}
	for i := range r.Items {
		r.Items[i].Demand = 0
		it := r.Items[i]
		if d := l.keyDesc[it.Key]; d != nil && it.Return.Lease != 0 {
			req.Items = append(req.Items, &weirv1.LeaseItem{Descriptors: d, Key: it.Key,
				ReturnGrantor: it.Return.Grantor, ReturnLease: it.Return.Lease, ReturnUnspent: it.Return.Unspent})
		}
	}
	l.mu.Unlock()
	if len(req.Items) == 0 {
		_ = st.s.CloseSend()
		return
	}
	l.leaseRPCs.Add(1)
	if st.s.Send(req) == nil {
		_ = st.s.CloseSend()
		t := l.clk.NewTimer(l.cfg.RefreshTimeout)
		defer t.Stop()
		for {
			select {
			case resp := <-st.answer:
				if resp.GetSeq() != req.GetSeq() {
					continue
				}
			case <-st.failed:
			case <-t.C():
			}
			return
		}
	}
}
