package peer

import (
	"fmt"
	"math"
	"time"

	peerv1 "github.com/weirhq/weir/api/weir/peer/v1"
	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/ticket"
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
	p := &peerv1.Item{
		Group:   it.Group,
		Keys:    it.Keys,
		Limits:  limits,
		Cost:    it.Cost,
		NowNs:   it.Now,
		NowUs:   it.Now / int64(time.Microsecond),
		Strict:  it.Strict,
		Debt:    it.Debt,
		Reserve: it.Reserve,
	}
	if op := it.Op; op != nil {
		// Cost 0: an owner older than op refuses the item (cost must be
		// > 0) rather than deciding it as a decision.
		p.Cost = 0
		p.Op = &peerv1.Op{Kind: uint32(op.Kind), Id: op.ID[:], TtlNs: op.TTL, Actual: op.Actual}
	}
	return p
}

// opFromProto reads an Op. A kind outside decide.OpKind's range reads as
// 0 and an id of any length but 16 as the zero id, both of which the
// owner's intake refuses (the server's codec refuses such ids already).
func opFromProto(p *peerv1.Op) *decide.Op {
	if p == nil {
		return nil
	}
	op := &decide.Op{TTL: p.GetTtlNs(), Actual: p.GetActual()}
	if k := p.GetKind(); k <= math.MaxUint8 {
		op.Kind = decide.OpKind(k)
	}
	if id := p.GetId(); len(id) == len(op.ID) {
		op.ID = [16]byte(id)
	}
	return op
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
		Group:   p.GetGroup(),
		Keys:    p.GetKeys(),
		Limits:  limits,
		Cost:    p.GetCost(),
		Now:     now,
		Strict:  p.GetStrict(),
		Debt:    p.GetDebt(),
		Reserve: p.GetReserve(),
		Op:      opFromProto(p.GetOp()),
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
	p := &peerv1.ItemResult{Overall: gcraToProto(r.Overall), Results: rs}
	if g := r.Grant; g != nil {
		p.Permit, p.Reservation, p.InFlight, p.Done, p.ExpiryNs = g.Permit, g.Reservation, g.InFlight, g.Done, g.Expiry
		st := g.Settlement
		p.Refunded, p.Kept, p.Extra, p.Forgiven = st.Refunded, st.Kept, st.Extra, st.Forgiven
	}
	return p
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
	return Result{Overall: gcraFromProto(p.GetOverall()), Results: rs, Grant: grantFromProto(p)}
}

// grantFromProto reads fields 6-14 of p: nil when all are zero (a plain
// decision's result, or a zero Grant: the two read alike).
func grantFromProto(p *peerv1.ItemResult) *decide.Grant {
	g := decide.Grant{
		Permit: p.GetPermit(), Reservation: p.GetReservation(), InFlight: p.GetInFlight(),
		Done: p.GetDone(), Expiry: p.GetExpiryNs(),
		Settlement: gcra.Settlement{Refunded: p.GetRefunded(), Kept: p.GetKept(), Extra: p.GetExtra(), Forgiven: p.GetForgiven()},
	}
	if len(g.Permit) == 0 && len(g.Reservation) == 0 && len(g.InFlight) == 0 && !g.Done && g.Expiry == 0 && g.Settlement == (gcra.Settlement{}) {
		return nil
	}
	if len(g.Permit) == 0 {
		g.Permit = nil
	}
	if len(g.Reservation) == 0 {
		g.Reservation = nil
	}
	if len(g.InFlight) == 0 {
		g.InFlight = nil
	}
	return &g
}

// checkGrant bounds what an owner's answer for an item of keys keys may
// carry beyond its results: tokens of at most ticket.MaxBytes, and at
// most one in_flight entry per key. The Client answers an item whose
// result exceeds them with an error rather than hand it on.
func checkGrant(p *peerv1.ItemResult, keys int) error {
	switch {
	case len(p.GetPermit()) > ticket.MaxBytes || len(p.GetReservation()) > ticket.MaxBytes:
		return fmt.Errorf("peer: owner answered a token of over %d bytes", ticket.MaxBytes)
	case len(p.GetInFlight()) > keys:
		return fmt.Errorf("peer: owner answered %d in-flight counts for %d keys", len(p.GetInFlight()), keys)
	}
	return nil
}

// remoteError rebuilds an owner's error message.
func remoteError(msg string) error {
	return fmt.Errorf("%w: %s", ErrRemote, msg)
}
