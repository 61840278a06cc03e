package owner

import (
	"context"
	"errors"
	"time"

	"github.com/weirhq/weir/limiter"
)

// A process that was frozen — SIGSTOP, a paused VM, a stall of the whole
// runtime — does not notice that time passed. If the freeze outlasted the
// failure detector, its peers declared it dead and decided its groups from
// Redis meanwhile; when it wakes, neither it nor gossip sees any membership
// change (it simply refutes the rumour of its death), so it would go on
// deciding from TATs that are as old as the freeze, granting bursts the
// keys already spent elsewhere.
//
// So the owner keeps a heartbeat, driven by its caller (forward.Router's
// RunHeartbeat calls Beat every BeatEvery and whenever ThawRequests
// fires). When a beat or a decision finds that more than FreezeLimit
// passed since the last beat, the node thaws: it flushes its buffered TATs
// (Redis keeps the later of its and its successors', see
// redisbackend.StoreTATs) and forgets every key, so each is loaded from
// Redis again on its next use. The flush can take up to HandoffTimeout, so
// it never runs on the request path: the caller's Beat does it, and until
// it is done fast decisions fail at once with the retryable reason
// "thawing" (the limiter applies the failure policy), so no caller waits
// on it. Strict decisions are unaffected.

// BeatEvery is how often the caller should Beat; it bounds how stale the
// last beat can be in normal operation.
const BeatEvery = 100 * time.Millisecond

// errThawing is the fallback while a thaw is pending or running.
var errThawing = &limiter.UnavailableError{Reason: "thawing", Err: errors.New("owner: reloading state after a freeze")}

// sinceBeat is how long ago the last heartbeat was, on the injected clock.
func (o *Owner) sinceBeat() time.Duration {
	return o.clk.Since(o.born) - time.Duration(o.lastBeat.Load())
}

func (o *Owner) beat() { o.lastBeat.Store(int64(o.clk.Since(o.born))) }

// frozen reports whether the process slept past FreezeLimit since the
// last heartbeat. Without Redis there is nothing to reload from; without a
// heartbeat there is nothing to measure.
func (o *Owner) frozen() bool {
	return o.deps.Redis != nil && o.beating.Load() && o.sinceBeat() > o.cfg.FreezeLimit
}

// thawPending reports whether memory must not be trusted: the node was
// found frozen and has not finished reloading.
func (o *Owner) thawPending() bool { return o.thawing.Load() || o.frozen() }

// Thawing reports whether a thaw is pending: fast decisions fall back
// with reason "thawing" until the next Beat has reloaded. Safe for
// concurrent use.
func (o *Owner) Thawing() bool { return o.thawPending() }

// checkThawed is the request path's check: nil when memory can be trusted,
// errThawing otherwise. A decision that finds the node frozen asks the
// heartbeat to thaw and returns without waiting for it.
func (o *Owner) checkThawed() error {
	if !o.thawPending() {
		return nil
	}
	o.noteFrozen()
	select {
	case o.thawNow <- struct{}{}:
	default: // already asked
	}
	return errThawing
}

// noteFrozen marks a freeze found, once per freeze.
func (o *Owner) noteFrozen() {
	gap := o.sinceBeat()
	if gap <= o.cfg.FreezeLimit || !o.thawing.CompareAndSwap(false, true) {
		return
	}
	o.metrics.freezes.Inc()
	o.logger.Warn("this node was frozen; reloading its state from Redis in the background", "frozen_for", gap.Round(time.Millisecond))
}

// StartHeartbeat beats once and starts measuring freezes: from now on the
// caller must call Beat every BeatEvery, until StopHeartbeat.
func (o *Owner) StartHeartbeat() {
	o.beat()
	o.beating.Store(true)
}

// StopHeartbeat stops measuring freezes (the caller stops beating).
func (o *Owner) StopHeartbeat() { o.beating.Store(false) }

// ThawRequests receives a value when a decision found this node frozen:
// the caller should Beat at once rather than at its next tick.
func (o *Owner) ThawRequests() <-chan struct{} { return o.thawNow }

// Beat is one heartbeat: it notes a freeze past FreezeLimit, thaws when
// one is pending (flushing and forgetting every key, up to HandoffTimeout:
// never call it on the request path), and records the beat. Call it from
// one goroutine.
func (o *Owner) Beat(ctx context.Context) {
	if o.frozen() {
		o.noteFrozen()
	}
	if o.thawing.Load() {
		o.thaw(ctx)
	}
	o.beat()
}

// thaw flushes and forgets every key, then beats, then lets fast decisions
// through again (in that order, so no decision sees the old beat).
func (o *Owner) thaw(ctx context.Context) {
	o.mu.Lock()
	defer o.mu.Unlock()
	start := o.clk.Now()
	o.dropLocked(ctx, func(string) bool { return true })
	o.beat()
	o.thawing.Store(false)
	o.logger.Info("thawed: state will be reloaded from Redis", "took", o.clk.Since(start))
}

// Beating reports whether the heartbeat runs (StartHeartbeat, not yet
// StopHeartbeat). Safe for concurrent use.
func (o *Owner) Beating() bool { return o.beating.Load() }
