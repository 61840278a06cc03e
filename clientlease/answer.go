package clientlease

import (
	"context"
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/lease"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/policy"
)

// answer checks req whole, then answers its lookups and relays its items
// to their owners. A request that fails the checks gets an error naming
// the field, before anything is resolved, settled or granted.
func (s *Service) answer(ctx context.Context, holder string, req *weirv1.HoldRequest) (*weirv1.HoldResponse, error) {
	if err := s.check(req); err != nil {
		return nil, err
	}
	p := s.deps.Policies.Current()
	out := &weirv1.HoldResponse{Seq: req.GetSeq(), Holder: holder}
	if p != nil {
		out.PolicyVersion = p.Version
	}
	members := max(1, s.deps.Members())
	for _, l := range req.GetLookups() {
		out.Lookups = append(out.Lookups, terms(p, l.GetDescriptors(), members))
	}
	items := req.GetItems()
	if len(items) == 0 {
		return out, nil
	}
	out.Grants = make([]*weirv1.LeaseGrant, len(items))
	r := lease.Refresh{Seq: req.GetSeq()}
	var idx []int // items relayed, by position in items
	var limits []*weirv1.LeasedLimit
	for i, it := range items {
		m, ok := leasedMatch(p, it, members)
		if !ok {
			out.Grants[i] = &weirv1.LeaseGrant{Outcome: weirv1.LeaseGrant_NOT_LEASABLE}
			s.m.items.WithLabelValues("not_leasable").Inc()
			continue
		}
		r.Items = append(r.Items, lease.Request{
			Peer: holder, Group: m.GroupValue, Key: m.Key, Limit: m.Params, Terms: *m.Limit.Lease, Label: m.Limit.Name,
			Demand: it.GetDemand(),
			Return: lease.Return{Grantor: it.GetReturnGrantor(), Lease: it.GetReturnLease(), Unspent: it.GetReturnUnspent()},
		})
		idx = append(idx, i)
		limits = append(limits, leasedLimit(m))
	}
	if len(idx) == 0 {
		return out, nil
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.RelayTimeout)
	answers, err := s.deps.Relay.Lease(rctx, holder, r)
	cancel()
	if err == nil && len(answers) != len(idx) {
		err = fmt.Errorf("relay returned %d answers for %d items", len(answers), len(idx))
		s.log.Error("lease relay broke its contract", "err", err)
	}
	for j, i := range idx {
		a := lease.Answer{Outcome: lease.Busy}
		if err == nil {
			a = answers[j]
		}
		out.Grants[i] = grantOf(a, limits[j])
		s.m.items.WithLabelValues(a.Outcome.String()).Inc()
	}
	return out, nil
}

// check validates the whole request, naming the first bad field.
func (s *Service) check(req *weirv1.HoldRequest) error {
	if len(req.ProtoReflect().GetUnknown()) > 0 {
		return fmt.Errorf("clientlease: request: unknown fields")
	}
	if n := len(req.GetLookups()); n > s.cfg.MaxLookups {
		return fmt.Errorf("clientlease: lookups: %d in one request, the most is %d", n, s.cfg.MaxLookups)
	}
	if n := len(req.GetItems()); n > s.cfg.MaxItems {
		return fmt.Errorf("clientlease: items: %d in one request, the most is %d", n, s.cfg.MaxItems)
	}
	for i, l := range req.GetLookups() {
		if len(l.ProtoReflect().GetUnknown()) > 0 {
			return fmt.Errorf("clientlease: lookups[%d]: unknown fields", i)
		}
		if err := checkDescriptors(l.GetDescriptors()); err != nil {
			return fmt.Errorf("clientlease: lookups[%d].%w", i, err)
		}
	}
	seen := make(map[string]bool, len(req.GetItems()))
	for i, it := range req.GetItems() {
		if err := s.checkItem(it, seen); err != nil {
			return fmt.Errorf("clientlease: items[%d].%w", i, err)
		}
	}
	return nil
}

func (s *Service) checkItem(it *weirv1.LeaseItem, seen map[string]bool) error {
	d := it.GetDemand()
	switch k := it.GetKey(); {
	case len(it.ProtoReflect().GetUnknown()) > 0:
		return fmt.Errorf("unknown fields")
	case k == "" || len(k) > s.cfg.MaxKeyBytes:
		return fmt.Errorf("key: %d bytes, must be 1 to %d", len(k), s.cfg.MaxKeyBytes)
	case seen[k]:
		return fmt.Errorf("key: %q appears twice", k)
	case math.IsNaN(d) || math.IsInf(d, 0) || d < 0:
		return fmt.Errorf("demand: %v is not a finite rate >= 0", d)
	case it.GetReturnUnspent() < 0 || (it.GetReturnLease() == 0 && it.GetReturnUnspent() != 0):
		return fmt.Errorf("return_unspent: %d units of lease %d", it.GetReturnUnspent(), it.GetReturnLease())
	case len(it.GetReturnGrantor()) > 256:
		return fmt.Errorf("return_grantor: %d bytes, the most is 256", len(it.GetReturnGrantor()))
	}
	seen[it.GetKey()] = true
	if err := checkDescriptors(it.GetDescriptors()); err != nil {
		return err
	}
	return nil
}

// checkDescriptors applies the public API's descriptor bounds.
func checkDescriptors(d map[string]string) error {
	if len(d) == 0 || len(d) > limiter.MaxDescriptors {
		return fmt.Errorf("descriptors: %d, must be 1 to %d", len(d), limiter.MaxDescriptors)
	}
	for k, v := range d {
		if k == "" || len(k) > limiter.MaxDescriptorBytes || len(v) > limiter.MaxDescriptorBytes {
			return fmt.Errorf("descriptors: name %.32q or its value is empty or longer than %d bytes", k, limiter.MaxDescriptorBytes)
		}
	}
	return nil
}

// terms answers one lookup from the policy.
func terms(p *policy.Policy, desc map[string]string, members int) *weirv1.LeaseTerms {
	if p == nil {
		return &weirv1.LeaseTerms{Reason: "no policy loaded"}
	}
	ms, err := p.Resolve(desc, nil)
	if err != nil {
		return &weirv1.LeaseTerms{Reason: err.Error()}
	}
	out := &weirv1.LeaseTerms{Matched: len(ms) > 0}
	if len(ms) == 0 {
		out.Reason = "no limit matches"
		return out
	}
	for i := range ms {
		if !ms[i].Leasable(members) {
			out.Limits = nil
			out.Reason = fmt.Sprintf("limit %q is not leasable here (lease terms, fast, enforced, burst >= %d per node)", ms[i].Limit.Name, lease.MinBurstPerNode)
			return out
		}
		out.Limits = append(out.Limits, leasedLimit(&ms[i]))
	}
	out.Leasable = true
	return out
}

// leasedMatch resolves an item's descriptors and returns the leasable
// match of its key, or false when the key is not (or no longer) one.
func leasedMatch(p *policy.Policy, it *weirv1.LeaseItem, members int) (*policy.Match, bool) {
	if p == nil {
		return nil, false
	}
	ms, err := p.Resolve(it.GetDescriptors(), nil)
	if err != nil {
		return nil, false
	}
	for i := range ms {
		if ms[i].Key == it.GetKey() {
			return &ms[i], ms[i].Leasable(members)
		}
	}
	return nil, false
}

func leasedLimit(m *policy.Match) *weirv1.LeasedLimit {
	return &weirv1.LeasedLimit{
		Name: m.Limit.Name, Key: m.Key, Burst: m.Params.Burst,
		Interval: durationpb.New(time.Duration(m.Params.Interval)),
		MaxUnits: m.Limit.Lease.Max, Ttl: durationpb.New(m.Limit.Lease.TTL),
	}
}

// wireOutcomes maps lease.Outcome to its wire value.
var wireOutcomes = [...]weirv1.LeaseGrant_Outcome{
	lease.Settled: weirv1.LeaseGrant_SETTLED, lease.Granted: weirv1.LeaseGrant_GRANTED,
	lease.Denied: weirv1.LeaseGrant_DENIED, lease.Capped: weirv1.LeaseGrant_CAPPED, lease.Busy: weirv1.LeaseGrant_BUSY,
}

func grantOf(a lease.Answer, l *weirv1.LeasedLimit) *weirv1.LeaseGrant {
	g := &weirv1.LeaseGrant{Outcome: weirv1.LeaseGrant_BUSY, Limit: l, Credited: a.Credited}
	if int(a.Outcome) < len(wireOutcomes) {
		g.Outcome = wireOutcomes[a.Outcome]
	}
	if a.RetryAfter > 0 {
		g.RetryAfter = durationpb.New(time.Duration(a.RetryAfter))
	}
	if a.Outcome == lease.Granted {
		g.Grantor, g.Lease, g.Units, g.Ttl = a.Grantor, a.Lease, a.Units, durationpb.New(time.Duration(a.TTL))
	}
	return g
}
