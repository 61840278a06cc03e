package forward

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/weirhq/weir/breaker"
	"github.com/weirhq/weir/peer"
)

// A slow owner is not a dead one. A forward waits for the owner as long as
// its caller's deadline allows, keeping back a reserve for the fallback
// decision; with no caller deadline it waits a timeout derived from the
// owner's observed round trips. Only failures that say something about the
// owner reach its breaker: a refused or broken connection, or a timeout of
// the owner's own latency budget. A timeout that the caller's deadline
// bounded, and one this node noticed late because it was itself
// descheduled, are excused, unless the owner has answered no forward at
// all for SilenceLimit: then it is cut off (a partition black-holes it, or
// it is frozen) as far as every caller can tell, and the timeout counts.
// docs/architecture.md ("Slow is not dead") explains the rules for
// operators.

// ForwardConfig tunes how long a non-owner waits for a group's owner.
type ForwardConfig struct {
	// MinReserve is the least time kept back from the caller's deadline for
	// the fallback decision after a forward that did not answer. Default
	// 2ms.
	MinReserve time.Duration
	// ReserveFraction is the share of the caller's remaining time kept back
	// when that is more than MinReserve, so that a starved node still has
	// time to fall back. Default 0.2; must be in [0, 1).
	ReserveFraction float64
	// MinTimeout floors the wait of a caller without a deadline, which is
	// otherwise the owner's smoothed round trip plus four deviations (as
	// TCP's retransmission timeout). Default 20ms.
	MinTimeout time.Duration
	// MaxTimeout is the longest any forward waits, whatever the caller's
	// deadline. Default 1s.
	MaxTimeout time.Duration
	// StallTolerance is how much later than its deadline a timed-out
	// forward may return before this node counts itself stalled
	// (descheduled, CPU-throttled, paused by GC) and excuses the owner.
	// Default 5ms.
	StallTolerance time.Duration
	// SilenceLimit is how long an owner may answer no forward at all while
	// forwards to it time out before a timeout the caller's deadline
	// bounded counts against its breaker too (blame "silent"). A slow
	// owner answers some forwards in time and is never silent; a
	// black-holed or frozen one is, and its breaker opens instead of every
	// caller waiting most of its deadline until gossip declares it dead.
	// Default 1s; 0 never counts silence.
	SilenceLimit time.Duration
}

// DefaultForwardConfig returns MinReserve 2ms, ReserveFraction 0.2,
// MinTimeout 20ms, MaxTimeout 1s, StallTolerance 5ms, SilenceLimit 1s.
func DefaultForwardConfig() ForwardConfig {
	return ForwardConfig{MinReserve: 2 * time.Millisecond, ReserveFraction: 0.2, MinTimeout: 20 * time.Millisecond,
		MaxTimeout: time.Second, StallTolerance: 5 * time.Millisecond, SilenceLimit: time.Second}
}

// Validate reports whether c is usable. It changes nothing.
func (c ForwardConfig) Validate() error {
	switch {
	case c.MinReserve < 0 || c.StallTolerance < 0 || c.SilenceLimit < 0:
		return errors.New("forward: forward reserve, stall tolerance and silence limit must not be negative")
	case !(c.ReserveFraction >= 0 && c.ReserveFraction < 1):
		return fmt.Errorf("forward: forward reserve fraction %v outside [0, 1)", c.ReserveFraction)
	case c.MinTimeout <= 0 || c.MaxTimeout < c.MinTimeout:
		return fmt.Errorf("forward: forward timeouts need 0 < min (%s) <= max (%s)", c.MinTimeout, c.MaxTimeout)
	}
	return nil
}

// errNoTimeToForward is returned when the caller's deadline leaves nothing
// after the reserve: the caller falls back without asking the owner.
var errNoTimeToForward = errors.New("forward: no time left to forward before the caller's deadline")

// forwardBudget is how long after now a forward to addr may wait: until
// the caller's deadline less the reserve (callerBound true), or, without a
// deadline or when that is further away, the owner's latency-derived
// timeout capped at MaxTimeout.
func (f *Router) forwardBudget(ctx context.Context, addr string, now time.Time) (budget time.Duration, callerBound bool) {
	fc := f.cfg.Forward
	d, ok := ctx.Deadline()
	if !ok {
		return f.rtt.timeout(addr, fc.MinTimeout, fc.MaxTimeout), false
	}
	left := d.Sub(now)
	left -= max(fc.MinReserve, time.Duration(float64(left)*fc.ReserveFraction))
	if left >= fc.MaxTimeout {
		return fc.MaxTimeout, false
	}
	return left, true
}

// forwardBlame is the outcome owner's breaker should count for a forward
// that took took of its budget, and feeds the owner's latency estimate.
func (f *Router) forwardBlame(ctx, fctx context.Context, addr string, err error, took, budget time.Duration, callerBound bool) error {
	switch {
	case err == nil:
		f.rtt.observe(addr, took)
		return nil
	case ctx.Err() != nil:
		f.metrics.forwardTimeouts.WithLabelValues("caller").Inc()
		return fmt.Errorf("caller ended: %w", breaker.ErrExcused)
	case errors.Is(err, peer.ErrClosed) || errors.Is(err, peer.ErrForgotten):
		return fmt.Errorf("%w: %w", breaker.ErrExcused, err) // this node dropped the peer
	case fctx.Err() == nil:
		return err // refused, reset, unavailable, or the transport's own timeout
	case took-budget > f.cfg.Forward.StallTolerance:
		f.metrics.forwardTimeouts.WithLabelValues("local_stall").Inc()
		return fmt.Errorf("noticed the deadline %s late: %w", took-budget, breaker.ErrExcused)
	case callerBound:
		// The owner may be slow, not dead; what it took is at least budget.
		f.rtt.atLeast(addr, took)
		if lim := f.cfg.Forward.SilenceLimit; lim > 0 && f.rtt.silent(addr, f.clk.Now(), f.clk.Now().Add(-took), lim) {
			f.metrics.forwardTimeouts.WithLabelValues("silent").Inc()
			return fmt.Errorf("owner answered nothing for over %s: %w", lim, err)
		}
		f.metrics.forwardTimeouts.WithLabelValues("caller").Inc()
		return fmt.Errorf("caller's deadline bounded the wait: %w", breaker.ErrExcused)
	default:
		// The owner's own budget ran out. Back off as TCP does: the next
		// caller without a deadline waits twice as long.
		f.rtt.atLeast(addr, 2*took)
		f.metrics.forwardTimeouts.WithLabelValues("owner").Inc()
		return err
	}
}

// rttTable keeps a smoothed round trip and its mean deviation per peer
// address (Jacobson's estimator, as in TCP: gains 1/8 and 1/4), and since
// when each peer has left forwards unanswered. It is safe for concurrent
// use; mu guards the maps and every entry.
type rttTable struct {
	mu    sync.Mutex
	peers map[string]*rtt
	// quiet is, per peer, when the first forward that timed out since its
	// last answer started; a peer that answers is removed.
	quiet map[string]time.Time
}

type rtt struct{ srtt, rttvar time.Duration }

// maxPeersTracked bounds the table between membership changes (retain
// prunes it to the members): when it is full it starts over, and every
// estimate restarts from MinTimeout. Clusters are far smaller.
const maxPeersTracked = 1024

// retain forgets every peer whose address is not in addrs (the members'
// peer addresses), so that address churn — pods replaced under new
// addresses — does not accumulate estimates of peers long gone.
func (t *rttTable) retain(addrs map[string]string) {
	keep := make(map[string]bool, len(addrs))
	for _, a := range addrs {
		keep[a] = true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	maps.DeleteFunc(t.peers, func(a string, _ *rtt) bool { return !keep[a] })
	maps.DeleteFunc(t.quiet, func(a string, _ time.Time) bool { return !keep[a] })
}

// observe records a round trip of d to addr, which has just answered.
func (t *rttTable) observe(addr string, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.observeLocked(addr, d)
	delete(t.quiet, addr)
}

// silent records that a forward to addr started at start timed out, and
// reports whether, at now, addr has answered nothing since longer than
// limit ago:
// since the start of the first forward that timed out after its last
// answer. An idle spell without forwards is not silence.
func (t *rttTable) silent(addr string, now, start time.Time, limit time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.entryLocked(addr)
	q, ok := t.quiet[addr]
	if !ok {
		t.quiet[addr], q = start, start
	}
	return now.Sub(q) > limit
}

func (t *rttTable) observeLocked(addr string, d time.Duration) {
	e := t.entryLocked(addr)
	if e == nil {
		t.peers[addr] = &rtt{srtt: d, rttvar: d / 2}
		return
	}
	diff := e.srtt - d
	if diff < 0 {
		diff = -diff
	}
	e.rttvar += (diff - e.rttvar) / 4
	e.srtt += (d - e.srtt) / 8
}

// atLeast records that a round trip to addr took at least d (the forward
// timed out after d): it moves the estimate only up.
func (t *rttTable) atLeast(addr string, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.entryLocked(addr); e == nil || d > e.srtt {
		t.observeLocked(addr, d)
	}
}

// timeout is the wait for addr's answer by a caller without a deadline:
// smoothed round trip plus four deviations, within [lo, hi].
func (t *rttTable) timeout(addr string, lo, hi time.Duration) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entryLocked(addr)
	if e == nil {
		return lo
	}
	return min(max(e.srtt+4*e.rttvar, lo), hi)
}

// entryLocked returns addr's entry, nil when there is none, making room
// for one. t.mu must be held.
func (t *rttTable) entryLocked(addr string) *rtt {
	if t.peers == nil || len(t.peers) >= maxPeersTracked || len(t.quiet) >= maxPeersTracked {
		t.peers, t.quiet = make(map[string]*rtt), make(map[string]time.Time)
	}
	return t.peers[addr]
}
