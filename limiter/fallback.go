package limiter

import (
	"context"
	"errors"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/memstore"
	"github.com/weirhq/weir/policy"
)

// fallback decides the enforced limits ms[idx...] when the store could not,
// by their failure policy. The strictest mode among them wins: one closed
// limit denies the request; otherwise limits with on_failure: local are
// decided on this node alone at their fallback rate; otherwise the request
// is admitted. The decision is flagged (d.Fallback) and counted.
//
// A concurrency limit is never decided locally (a local permit count
// means nothing): on_failure open admits it without a permit, anything
// else (closed, or local, which policy check refuses for it) denies. An
// admission by fallback holds no permit or reservation, and concurrency
// keys are never recorded as fallback debt.
func (l *Limiter) fallback(ctx context.Context, ms []policy.Match, idx []int, cost, now int64, d *Decision, reason string) gcra.Result {
	mode := policy.FailOpen
	for _, i := range idx {
		switch m := failureMode(ms[i]); {
		case m == policy.FailClosed:
			mode = m
		case m == policy.FailLocal && mode == policy.FailOpen:
			mode = m
		}
	}
	var agg gcra.Result
	switch mode {
	case policy.FailClosed:
		agg = l.failClosed(ms, idx, cost, d)
	case policy.FailLocal:
		agg, mode = l.failLocal(ctx, ms, idx, cost, now, d)
	default:
		agg = gcra.Result{Allowed: true}
		for _, i := range idx {
			d.Limits[i] = describe(ms[i], agg)
		}
	}
	d.Fallback = &Fallback{Mode: string(mode), Reason: reason}
	for _, i := range idx {
		l.metrics.fallbacks.WithLabelValues(ms[i].Limit.Name, reason, string(mode)).Inc()
	}
	if agg.Allowed && reason != ReasonPermitsUnavailable { // that owner charged them already
		l.recordDebt(ms, idx, cost)
	}
	d.Permit, d.Reservation = nil, nil
	return agg
}

// failureMode is m's on_failure as the fallback applies it: a concurrency
// limit's local is closed.
func failureMode(m policy.Match) policy.FailureMode {
	if mode := m.Limit.OnFailure; mode != policy.FailLocal || !m.Limit.Def().Concurrency {
		return mode
	}
	return policy.FailClosed
}

// recordDebt reports an admission by fallback of the fast limits ms[idx...]
// to the store, if it repays them. A composite with a strict limit is not
// reported: its keys live in Redis, not in an owner's memory. Concurrency
// keys are left out (a fallback admission holds no slot, so it owes none).
func (l *Limiter) recordDebt(ms []policy.Match, idx []int, cost int64) {
	if l.debtor == nil {
		return
	}
	var kb [8]string
	var lb [8]gcra.Limit
	keys, limits := kb[:0], lb[:0]
	for _, i := range idx {
		if ms[i].Limit.Consistency == policy.ConsistencyStrict {
			return
		}
		if ms[i].Limit.Def().Concurrency {
			continue
		}
		keys = append(keys, ms[i].Key)
		limits = append(limits, ms[i].Params)
	}
	if len(keys) == 0 {
		return
	}
	l.debtor.RecordFallback(ms[idx[0]].GroupValue, keys, limits, cost)
}

// failClosed denies. The state is unknown, so the retry-after is an
// estimate: the time each closed limit needs to earn the request's cost,
// the least wait after which it could possibly pass.
func (l *Limiter) failClosed(ms []policy.Match, idx []int, cost int64, d *Decision) gcra.Result {
	agg := gcra.Result{}
	for _, i := range idx {
		r := gcra.Result{Allowed: true}
		switch p := ms[i].Params; {
		case failureMode(ms[i]) != policy.FailClosed:
		case ms[i].Limit.Def().Concurrency:
			// At most a permit ttl until a slot is surely free.
			_, ttl := decide.PermitLimit(p)
			r = gcra.Result{RetryAfter: ttl}
		default:
			r = gcra.Result{RetryAfter: p.Interval * min(cost, p.Burst)}
		}
		agg.RetryAfter = max(agg.RetryAfter, r.RetryAfter)
		d.Limits[i] = describe(ms[i], r)
	}
	return agg
}

// failLocal decides the limits with on_failure: local in this node's own
// memory at their fallback rate and burst (or this node's share of the
// limit, or of the part its cluster holds: WithFallbackPart); open limits
// among them admit. It returns the mode it applied: local, or closed when
// the local state is full of live keys (Config.FallbackMaxKeys) and cannot
// hold the request's, or when a limit's part admits nothing.
func (l *Limiter) failLocal(ctx context.Context, ms []policy.Match, idx []int, cost, now int64, d *Decision) (gcra.Result, policy.FailureMode) {
	var kb [8]string
	var lb [8]gcra.Limit
	var rb [8]gcra.Result
	keys, limits, out := kb[:0], lb[:0], rb[:0]
	var local []int
	n := l.members()
	none := false // some limit's fallback admits nothing
	for _, i := range idx {
		if ms[i].Limit.OnFailure == policy.FailLocal {
			lim, ok := l.fallbackLimit(ms[i], n)
			none = none || !ok
			local = append(local, i)
			keys = append(keys, ms[i].Key)
			limits = append(limits, lim)
			out = append(out, gcra.Result{})
		} else {
			d.Limits[i] = describe(ms[i], gcra.Result{Allowed: true})
		}
	}
	var agg gcra.Result
	err := errNoFallback
	if !none {
		agg, err = l.local.Decide(ctx, ms[idx[0]].GroupValue, keys, limits, cost, now, out)
	}
	switch {
	case errors.Is(err, memstore.ErrFull) || errors.Is(err, errNoFallback):
		// No room for this request's state, or nothing to admit it from:
		// deny, as a closed limit would, with the time the fallback rate
		// needs to earn the cost.
		agg = denyAll(limits, cost, out)
	case err != nil: // only a cancelled context gets here; deny safely
		return gcra.Result{RetryAfter: limits[0].Interval}, policy.FailLocal
	}
	for n, i := range local {
		ld := describe(ms[i], out[n])
		ld.Burst, ld.Window = limits[n].Burst, nanos(limits[n].Span())
		d.Limits[i] = ld
	}
	if err != nil {
		return agg, policy.FailClosed
	}
	return agg, policy.FailLocal
}

// errNoFallback stands for a fallback limit that admits nothing
// (WithFallbackPart's ok false); it never leaves failLocal.
var errNoFallback = errors.New("limiter: the fallback admits nothing")

// denyAll fills out with denials at limits and returns their aggregate:
// each retries after the time its limit needs to earn cost (at least one
// interval).
func denyAll(limits []gcra.Limit, cost int64, out []gcra.Result) gcra.Result {
	var agg gcra.Result
	for n := range out {
		out[n] = gcra.Result{RetryAfter: limits[n].Interval * max(1, min(cost, limits[n].Burst))}
		agg.RetryAfter = max(agg.RetryAfter, out[n].RetryAfter)
	}
	return agg
}

// FallbackPart returns the part of whole, the limit lim gives a key, that
// this node's cluster holds whatever happens elsewhere: whole itself when
// the cluster enforces all of it, a smaller limit when the limit is shared
// with other clusters (a scope: global limit's regional floor), ok false
// when that part admits nothing. It must be safe for concurrent use and
// cheap: it is called on every local fallback decision.
type FallbackPart func(lim *policy.Limit, whole gcra.Limit) (part gcra.Limit, ok bool)

// WithFallbackPart makes local fallbacks honour part: a limit whose part
// is smaller than its whole falls back to this node's share of the part
// (policy.SharedLimit over the members), and a fallback_rate the policy
// gives it is cut to that share when it is looser. Then the fallbacks of
// all the clusters sharing a limit add up to no more than the limit. The
// node sets it when it shares global limits between regions.
func WithFallbackPart(part FallbackPart) Option { return func(l *Limiter) { l.part = part } }

// fallbackLimit is the limit m falls back to on this node among members:
// m.FallbackLimit, made no looser than this node's share of the part of
// m's limit its cluster holds (WithFallbackPart). ok is false when that
// part admits nothing.
func (l *Limiter) fallbackLimit(m policy.Match, members int) (gcra.Limit, bool) {
	own := m.FallbackLimit(members)
	if l.part == nil {
		return own, true
	}
	part, ok := l.part(m.Limit, m.Params)
	switch {
	case !ok:
		return gcra.Limit{Interval: m.Params.Interval}, false
	case part == m.Params: // held whole: the policy's fallback as it is
		return own, true
	}
	share := policy.SharedLimit(part, members)
	if m.Limit.SharedFallback {
		return share, true
	}
	return gcra.Limit{Interval: max(own.Interval, share.Interval), Burst: min(own.Burst, share.Burst)}, true
}

// SweepFallback frees rested keys of the local fallback state. Call it
// periodically (the node does, with its own sweeper).
func (l *Limiter) SweepFallback(now int64) int { return l.local.Sweep(now) }
