package peer

import (
	"fmt"

	peerv1 "github.com/weirhq/weir/api/weir/peer/v1"
	"github.com/weirhq/weir/gcra"
)

// Conversions between the Go types and their wire form. They are total: any
// message converts, and validating the values is the Handler's job.

func itemToProto(it Item) *peerv1.Item {
	limits := make([]*peerv1.Limit, len(it.Limits))
	for i, l := range it.Limits {
		limits[i] = &peerv1.Limit{IntervalUs: l.Interval, Burst: l.Burst}
	}
	return &peerv1.Item{
		Group:  it.Group,
		Keys:   it.Keys,
		Limits: limits,
		Cost:   it.Cost,
		NowUs:  it.Now,
		Strict: it.Strict,
		Debt:   it.Debt,
	}
}

func itemFromProto(p *peerv1.Item) Item {
	limits := make([]gcra.Limit, len(p.GetLimits()))
	for i, l := range p.GetLimits() {
		limits[i] = gcra.Limit{Interval: l.GetIntervalUs(), Burst: l.GetBurst()}
	}
	return Item{
		Group:  p.GetGroup(),
		Keys:   p.GetKeys(),
		Limits: limits,
		Cost:   p.GetCost(),
		Now:    p.GetNowUs(),
		Strict: p.GetStrict(),
		Debt:   p.GetDebt(),
	}
}

func gcraToProto(r gcra.Result) *peerv1.Result {
	return &peerv1.Result{
		Allowed:      r.Allowed,
		TooCostly:    r.TooCostly,
		Tat:          r.TAT,
		RetryAfterUs: r.RetryAfter,
		Remaining:    r.Remaining,
		ResetAfterUs: r.ResetAfter,
	}
}

func gcraFromProto(p *peerv1.Result) gcra.Result {
	return gcra.Result{
		Allowed:    p.GetAllowed(),
		TooCostly:  p.GetTooCostly(),
		TAT:        p.GetTat(),
		RetryAfter: p.GetRetryAfterUs(),
		Remaining:  p.GetRemaining(),
		ResetAfter: p.GetResetAfterUs(),
	}
}

// resultToProto encodes r. A NotOwner or Err answer carries no results.
func resultToProto(r Result) *peerv1.ItemResult {
	switch {
	case r.Err != nil:
		msg := r.Err.Error()
		if msg == "" {
			msg = "unspecified error" // empty would read as "no error"
		}
		return &peerv1.ItemResult{Error: msg, Reason: r.Reason}
	case r.NotOwner != "":
		return &peerv1.ItemResult{NotOwner: r.NotOwner}
	}
	rs := make([]*peerv1.Result, len(r.Results))
	for i, x := range r.Results {
		rs[i] = gcraToProto(x)
	}
	return &peerv1.ItemResult{Overall: gcraToProto(r.Overall), Results: rs}
}

func resultFromProto(p *peerv1.ItemResult) Result {
	switch {
	case p.GetError() != "":
		return Result{Err: remoteError(p.GetError()), Reason: p.GetReason()}
	case p.GetNotOwner() != "":
		return Result{NotOwner: p.GetNotOwner()}
	}
	rs := make([]gcra.Result, len(p.GetResults()))
	for i, x := range p.GetResults() {
		rs[i] = gcraFromProto(x)
	}
	return Result{Overall: gcraFromProto(p.GetOverall()), Results: rs}
}

// remoteError rebuilds an owner's error message.
func remoteError(msg string) error {
	return fmt.Errorf("%w: %s", ErrRemote, msg)
}
