package server

import (
	"time"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/limiter"
	"google.golang.org/protobuf/types/known/durationpb"
)

// FromProto converts a weir.v1 request to the limiter's form. An absent
// cost becomes 1, the API's default; a present cost is passed on as it is,
// so an explicit 0 or a negative cost reaches the limiter, which refuses
// it. The Request shares in's descriptor map, so in must not change while
// the Request is in use. A nil in gives a Request of cost 1 and no
// descriptors.
func FromProto(in *weirv1.DecideRequest) limiter.Request {
	cost := int64(1)
	if in != nil && in.Cost != nil {
		cost = *in.Cost
	}
	return limiter.Request{Descriptors: in.GetDescriptors(), Cost: cost, Reserve: in.GetReserve()}
}

// ToProto converts a limiter decision to its weir.v1 form. Zero durations
// are left unset, which reads as zero. The response's parts (limit
// statuses, durations) are allocated together: one allocation for a
// decision of up to two limits, four for more (a fallback adds one).
func ToProto(d limiter.Decision) *weirv1.DecideResponse {
	if len(d.Limits) <= 1 { // one limit (Envoy's descriptors, simple policies): the smallest slab
		b := new(oneLimitResponse)
		r := responses{resps: b.resp[:], limits: b.limits[:], ptrs: b.ptrs[:], durs: b.durs[:]}
		return r.next(d)
	}
	if len(d.Limits) <= smallLimits {
		b := new(smallResponse)
		r := responses{resps: b.resp[:], limits: b.limits[:], ptrs: b.ptrs[:], durs: b.durs[:]}
		return r.next(d)
	}
	ds := [1]limiter.Decision{d}
	r := newResponses(ds[:])
	return r.next(d)
}

// smallLimits is the most limits of a response ToProto builds in one
// allocation (a smallResponse): the built-in policy's composite has two.
const smallLimits = 2

// smallResponse holds every message a response of up to smallLimits limits
// may need: its two durations and three per limit.
type smallResponse struct {
	resp   [1]weirv1.DecideResponse
	limits [smallLimits]weirv1.LimitStatus
	ptrs   [smallLimits]*weirv1.LimitStatus
	durs   [2 + 3*smallLimits]durationpb.Duration
}

// oneLimitResponse is a smallResponse for a decision of at most one limit.
type oneLimitResponse struct {
	resp   [1]weirv1.DecideResponse
	limits [1]weirv1.LimitStatus
	ptrs   [1]*weirv1.LimitStatus
	durs   [2 + 3]durationpb.Duration
}

// ToProtoBatch converts decisions to their weir.v1 forms, in order, as
// ToProto does each. All responses share a few allocations, so a batch's
// response costs about as many allocations as one.
func ToProtoBatch(decs []limiter.Decision) []*weirv1.DecideResponse {
	r := newResponses(decs)
	out := make([]*weirv1.DecideResponse, len(decs))
	for i, d := range decs {
		out[i] = r.next(d)
	}
	return out
}

// responses hands out the messages of a known set of decisions from slabs
// sized for them: one allocation per message type instead of one per
// message. A message taken from a slab keeps the whole slab reachable, so
// the slabs hold only what one answer needs and go out of use with it.
type responses struct {
	resps  []weirv1.DecideResponse
	limits []weirv1.LimitStatus
	ptrs   []*weirv1.LimitStatus
	durs   []durationpb.Duration
}

// newResponses sizes the slabs for decs exactly.
func newResponses(decs []limiter.Decision) responses {
	var nl, nd int
	for _, d := range decs {
		nl += len(d.Limits)
		nd += nonZero(d.RetryAfter) + nonZero(d.ResetAfter)
		for _, l := range d.Limits {
			nd += nonZero(l.RetryAfter) + nonZero(l.ResetAfter) + nonZero(l.Window)
		}
	}
	r := responses{resps: make([]weirv1.DecideResponse, len(decs))}
	if nl > 0 {
		r.limits = make([]weirv1.LimitStatus, nl)
		r.ptrs = make([]*weirv1.LimitStatus, nl)
	}
	if nd > 0 {
		r.durs = make([]durationpb.Duration, nd)
	}
	return r
}

// next converts d, one of the decisions r was sized for.
func (r *responses) next(d limiter.Decision) *weirv1.DecideResponse {
	out := &r.resps[0]
	r.resps = r.resps[1:]
	out.Allowed = d.Allowed
	out.RetryAfter = r.duration(d.RetryAfter)
	out.Remaining = d.Remaining
	out.ResetAfter = r.duration(d.ResetAfter)
	out.Matched = d.Matched
	out.TooCostly = d.TooCostly
	out.PolicyVersion = d.PolicyVersion
	out.FromLease = d.FromLease
	out.Permit = d.Permit
	out.Reservation = d.Reservation
	if n := len(d.Limits); n > 0 {
		out.Limits = r.ptrs[:n:n]
		r.ptrs = r.ptrs[n:]
		for i, l := range d.Limits {
			out.Limits[i] = r.limit(l)
		}
	}
	if d.Fallback != nil {
		out.Fallback = &weirv1.Fallback{Mode: d.Fallback.Mode, Reason: d.Fallback.Reason}
	}
	return out
}

func (r *responses) limit(l limiter.LimitDecision) *weirv1.LimitStatus {
	s := &r.limits[0]
	r.limits = r.limits[1:]
	s.Name = l.Name
	s.Key = l.Key
	s.Allowed = l.Allowed
	s.Remaining = l.Remaining
	s.RetryAfter = r.duration(l.RetryAfter)
	s.Shadow = l.Shadow
	s.Burst = l.Burst
	s.Window = r.duration(l.Window)
	s.ResetAfter = r.duration(l.ResetAfter)
	s.TooCostly = l.TooCostly
	s.InFlight = l.InFlight
	s.Kind = l.Kind
	return s
}

// duration returns d as a message from the slab, or nil for zero (unset
// reads as zero), with durationpb.New's split into seconds and nanos.
func (r *responses) duration(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	p := &r.durs[0]
	r.durs = r.durs[1:]
	p.Seconds = int64(d / time.Second)
	p.Nanos = int32(d % time.Second)
	return p
}

func nonZero(d time.Duration) int {
	if d != 0 {
		return 1
	}
	return 0
}
