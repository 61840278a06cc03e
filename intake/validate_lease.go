package intake

import (
	"context"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/weirhq/weir/lease"
	"github.com/weirhq/weir/limitkey"
	"github.com/weirhq/weir/peer"
	"github.com/weirhq/weir/policy"
)

// maxFromBytes bounds a lease sender's name (node name plus incarnation).
const maxFromBytes = 256

var _ peer.LeaseHandler = (*Validator)(nil)

// HandleLease checks every item of a lease refresh as strictly as a
// forwarded item, then passes the accepted ones, in order, to the inner
// Handler's HandleLease in one call; refused items get their error
// (wrapping ErrRefused, counted in weir_peer_items_refused_total). Beyond
// the shape, group and params checks of HandleDecide, the key must belong
// to a limit the owner's policy leases: the owner's lease terms and limit
// name replace the sender's, so no sender can ask for more units per grant
// or a longer lifetime than the policy gives. A sender with no name, or
// an inner Handler that grants no leases, refuses every item.
func (v *Validator) HandleLease(ctx context.Context, from string, r lease.Refresh) []peer.LeaseAnswer {
	answers := make([]peer.LeaseAnswer, len(r.Items))
	next, ok := v.next.(peer.LeaseHandler)
	if !ok || from == "" || len(from) > maxFromBytes || !utf8.ValidString(from) {
		for i := range answers {
			answers[i].Err = fmt.Errorf("%w: sender %.64q or this node cannot lease", ErrRefused, from)
		}
		v.refused.WithLabelValues("lease").Add(float64(len(answers)))
		return answers
	}
	pass := lease.Refresh{Owner: r.Owner, Seq: r.Seq, Items: make([]lease.Request, 0, len(r.Items))}
	idx := make([]int, 0, len(r.Items))
	p := v.policies.Current()
	for i := range r.Items {
		it, reason, err := v.checkLease(r.Items[i], from, p)
		if err != nil {
			v.refused.WithLabelValues(reason).Inc()
			answers[i].Err = fmt.Errorf("%w: %w", ErrRefused, err)
			continue
		}
		pass.Items = append(pass.Items, it)
		idx = append(idx, i)
	}
	if len(idx) == 0 {
		return answers
	}
	got := next.HandleLease(ctx, from, pass)
	for j, i := range idx {
		if j < len(got) {
			answers[i] = got[j]
		} else {
			answers[i].Err = errors.New("intake: handler returned too few lease answers")
		}
	}
	return answers
}

// checkLease returns the request to pass on, with the owner's numbers,
// terms and limit name, or the refusal's metric reason and error.
func (v *Validator) checkLease(it lease.Request, from string, p *policy.Policy) (lease.Request, string, error) {
	switch {
	case it.Key == "" || len(it.Key) > v.cfg.MaxKeyBytes || !utf8.ValidString(it.Key):
		return it, "shape", fmt.Errorf("key is %d bytes (1 to %d) or not UTF-8", len(it.Key), v.cfg.MaxKeyBytes)
	case math.IsNaN(it.Demand) || math.IsInf(it.Demand, 0) || it.Demand < 0:
		return it, "shape", fmt.Errorf("demand %v is not a finite rate >= 0", it.Demand)
	case it.Return.Unspent < 0 || len(it.Return.Grantor) > maxFromBytes:
		return it, "shape", fmt.Errorf("return of %d units from a grantor of %d bytes", it.Return.Unspent, len(it.Return.Grantor))
	}
	if tag := limitkey.GroupTag(it.Group); limitkey.HashTag(it.Key) != tag || tag == "" {
		return it, "group", fmt.Errorf("key has hash tag %q, not the item's group %q", limitkey.HashTag(it.Key), it.Group)
	}
	l, set, how := keyLimit(p, it.Key) // one parse of the key
	if l == nil || l.Lease == nil || l.Consistency != policy.ConsistencyFast {
		return it, "lease", errors.New("the owner's policy leases no limit of this key")
	}
	params, err := v.params(set, how, it.Limit, policy.CheckParams)
	if err != nil {
		return it, "params", err
	}
	if params != it.Limit {
		v.replaced.Inc()
	}
	it.Peer, it.Limit, it.Terms, it.Label = from, params, *l.Lease, l.Name
	return it, "", nil
}
