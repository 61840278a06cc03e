package peer

import (
	"fmt"
	"time"

	peerv1 "github.com/weirhq/weir/api/weir/peer/v1"
	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
)

// Conversions between the Go types and their wire form. They are total: any
// message converts, and validating the values is the Handler's job.
//
// Times are nanoseconds in Go. The wire carries them twice, in nanoseconds
// and in the microseconds older peers read (see peer.proto): senders fill
// both, receivers prefer nanoseconds and fall back to microseconds * 1000
// when a peer too old to send nanoseconds left them zero.

// usToNs reads a microsecond wire value from an older peer.
func usToNs(us int64) int64 { return us * int64(time.Microsecond) }

func itemToProto(it decide.Request) *peerv1.Item {
	limits := make([]*peerv1.Limit, len(it.Limits))
	for i, l := range it.Limits {
		limits[i] = &peerv1.Limit{IntervalNs: l.Interval, IntervalUs: gcra.CeilMicros(l.Interval), Burst: l.Burst}
	}
	return &peerv1.Item{
		Group:  it.Group,
		Keys:   it.Keys,
		Limits: limits,
		Cost:   it.Cost,
		NowNs:  it.Now,
		NowUs:  it.Now / int64(time.Microsecond),
		Strict: it.Strict,
		Debt:   it.Debt,
	}
}

func itemFromProto(p *peerv1.Item) decide.Request {
	limits := make([]gcra.Limit, len(p.GetLimits()))
	for i, l := range p.GetLimits() {
		iv := l.GetIntervalNs()
		if iv == 0 {
			iv = usToNs(l.GetIntervalUs())
		}
		limits[i] = gcra.Limit{Interval: iv, Burst: l.GetBurst()}
	}
	now := p.GetNowNs()
	if now == 0 {
		now = usToNs(p.GetNowUs())
	}
	return decide.Request{
		Group:  p.GetGroup(),
		Keys:   p.GetKeys(),
		Limits: limits,
		Cost:   p.GetCost(),
		Now:    now,
		Strict: p.GetStrict(),
		Debt:   p.GetDebt(),
	}
}

func gcraToProto(r gcra.Result) *peerv1.Result {
	return &peerv1.Result{
		Allowed:      r.Allowed,
		TooCostly:    r.TooCostly,
		Remaining:    r.Remaining,
		TatNs:        r.TAT,
		RetryAfterNs: r.RetryAfter,
		ResetAfterNs: r.ResetAfter,
		Tat:          r.TAT / int64(time.Microsecond),
		RetryAfterUs: gcra.CeilMicros(r.RetryAfter),
		ResetAfterUs: gcra.CeilMicros(r.ResetAfter),
	}
}

func gcraFromProto(p *peerv1.Result) gcra.Result {
	r := gcra.Result{
		Allowed:    p.GetAllowed(),
		TooCostly:  p.GetTooCostly(),
		Remaining:  p.GetRemaining(),
		TAT:        p.GetTatNs(),
		RetryAfter: p.GetRetryAfterNs(),
		ResetAfter: p.GetResetAfterNs(),
	}
	// An older owner sends microseconds only. A newer one leaves tat_ns
	// zero only for a zero TAT, and then sends tat 0 too. (An older owner's
	// zero TAT comes with zero waits: a rested key.)
	if r.TAT == 0 && p.GetTat() != 0 {
		r.TAT, r.RetryAfter, r.ResetAfter = usToNs(p.GetTat()), usToNs(p.GetRetryAfterUs()), usToNs(p.GetResetAfterUs())
	}
	return r
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
