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
	return limiter.Request{Descriptors: in.GetDescriptors(), Cost: cost}
}

// ToProto converts a limiter decision to its weir.v1 form. Zero durations
// are left unset, which reads as zero.
func ToProto(d limiter.Decision) *weirv1.DecideResponse {
	out := &weirv1.DecideResponse{
		Allowed:       d.Allowed,
		RetryAfter:    durationOrNil(d.RetryAfter),
		Remaining:     d.Remaining,
		ResetAfter:    durationOrNil(d.ResetAfter),
		Matched:       d.Matched,
		TooCostly:     d.TooCostly,
		PolicyVersion: d.PolicyVersion,
		FromLease:     d.FromLease,
	}
	if len(d.Limits) > 0 {
		out.Limits = make([]*weirv1.LimitStatus, len(d.Limits))
		for i, l := range d.Limits {
			out.Limits[i] = limitToProto(l)
		}
	}
	if d.Fallback != nil {
		out.Fallback = &weirv1.Fallback{Mode: d.Fallback.Mode, Reason: d.Fallback.Reason}
	}
	return out
}

func limitToProto(l limiter.LimitDecision) *weirv1.LimitStatus {
	return &weirv1.LimitStatus{
		Name:       l.Name,
		Key:        l.Key,
		Allowed:    l.Allowed,
		Remaining:  l.Remaining,
		RetryAfter: durationOrNil(l.RetryAfter),
		Shadow:     l.Shadow,
		Burst:      l.Burst,
		Window:     durationOrNil(l.Window),
		ResetAfter: durationOrNil(l.ResetAfter),
		TooCostly:  l.TooCostly,
	}
}

func durationOrNil(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}
