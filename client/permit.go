package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
)

// ErrPermitLost is wrapped by the error OnPermitError receives when the
// owner answered that it holds no such permit: it expired (renewals did
// not arrive within its TTL) or was lost with a crashed owner that had no
// Redis. Its slots may be held by other callers now.
var ErrPermitLost = errors.New("client: permit lost")

// kindConcurrency is LimitStatus.kind of a concurrency limit.
const kindConcurrency = "concurrency"

// Acquire asks, with one Decide RPC, whether a request with these
// descriptors may start, and when admitted holds the permit the answer
// carries (DecideResponse.permit: one slot on each concurrency limit the
// descriptors match, and a charge of 1 on the rate limits they match)
// until release is called. It never goes through batching
// (Config.BatchWindow) or leases (Config.Leases): the permit is the
// caller's own. With Config.Route it goes to the descriptors' owner as
// Decide does.
//
// While the permit is held, a goroutine renews it every third of its TTL
// (the smallest window of the answer's concurrency limits), so work may
// run longer than one TTL. A renewal the owner answers with renewed:
// false stops renewing and is reported to Config.OnPermitError wrapping
// ErrPermitLost; the caller's work goes on, but its slots are no longer
// counted.
//
// release is never nil and safe to call more than once and from several
// goroutines: the first call stops the renewer and sends Release with a
// timeout of its own (Config.Timeout, not ctx, which may have ended by
// then); later calls do nothing. It does not panic and returns once the
// Release was answered or timed out; failures go to OnPermitError (a
// permit whose Release fails frees its slots at its TTL). Call it when the
// work ends, before Close: after Close permits are no longer renewed and
// release cannot send.
//
// resp is the decision. Denied (resp.allowed false: resp says why and
// when to retry), or admitted without a permit (no concurrency limit
// matched, or the limit's failure policy admitted with a fallback that
// holds no slot), release does nothing. Errors are as for Decide; release
// then does nothing and resp is nil. A permit granted for a call that
// returned an error (its answer lost) frees its slots at its TTL. The
// descriptors map is not retained. Safe for concurrent use.
func (c *Client) Acquire(ctx context.Context, descriptors map[string]string) (release func(), resp *weirv1.DecideResponse, err error) {
	resp, err = c.decideDirect(ctx, "acquire", &weirv1.DecideRequest{Descriptors: descriptors})
	if err != nil || !resp.GetAllowed() || len(resp.GetPermit()) == 0 {
		return func() {}, resp, err
	}
	h := c.hold(maps.Clone(descriptors), resp.GetPermit(), permitTTL(resp))
	return h.release, resp, nil
}

// decideDirect is one Decide RPC routed by req's descriptors, never
// batched nor decided from leases.
func (c *Client) decideDirect(ctx context.Context, op string, req *weirv1.DecideRequest) (*weirv1.DecideResponse, error) {
	if c.life.Err() != nil {
		return nil, ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	resp, err := c.decideOne(ctx, c.pick(req), req)
	return resp, c.callError(ctx, op, err)
}

// permitTTL is the life of resp's permit: the smallest window of its
// concurrency limits (a concurrency limit's LimitStatus.window is its
// ttl), or 0 when none says.
func permitTTL(resp *weirv1.DecideResponse) time.Duration {
	var ttl time.Duration
	for _, l := range resp.GetLimits() {
		if l.GetKind() != kindConcurrency {
			continue
		}
		if w := l.GetWindow().AsDuration(); w > 0 && (ttl == 0 || w < ttl) {
			ttl = w
		}
	}
	return ttl
}

// held is one permit Acquire holds, with its renewer.
//
// Concurrency: the renewer goroutine is the only one that renews; release
// (once) cancels it and waits for it to end before sending Release, so no
// renewal follows a release.
type held struct {
	c     *Client
	desc  map[string]string
	token []byte
	stop  context.CancelFunc
	done  chan struct{} // closed when the renewer has ended (or never ran)
	once  sync.Once
}

// hold starts renewing token every ttl/3 until released or the Client
// closes. Without a ttl, or once the Client is closing, nothing renews it.
func (c *Client) hold(desc map[string]string, token []byte, ttl time.Duration) *held {
	h := &held{c: c, desc: desc, token: token, stop: func() {}, done: make(chan struct{})}
	every := ttl / 3
	if every <= 0 || !c.renewers.add() {
		close(h.done)
		return h
	}
	ctx, cancel := context.WithCancel(c.life)
	h.stop = cancel
	go func() {
		defer c.renewers.wg.Done()
		defer close(h.done)
		h.renew(ctx, every)
	}()
	return h
}

// renew renews the permit every every until ctx ends, the owner no longer
// holds it, or the owner refuses the token as malformed.
func (h *held) renew(ctx context.Context, every time.Duration) {
	t := h.c.cfg.Clock.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		_, renewed, err := h.c.Renew(ctx, h.token, 0)
		switch {
		case ctx.Err() != nil:
			return // released or closed meanwhile: not the permit's fault
		case err != nil:
			h.c.permitError(h.desc, err)
			if isInvalid(err) {
				return
			}
		case !renewed:
			h.c.permitError(h.desc, fmt.Errorf("client: renew: %w", ErrPermitLost))
			return
		}
		t.Reset(every)
	}
}

// release stops the renewer and gives the permit back, once.
func (h *held) release() {
	h.once.Do(func() {
		h.stop()
		<-h.done
		ctx, cancel := context.WithTimeout(context.Background(), h.c.cfg.Timeout)
		defer cancel()
		released, err := h.c.Release(ctx, h.token)
		switch {
		case err != nil:
			h.c.permitError(h.desc, err)
		case !released:
			h.c.permitError(h.desc, fmt.Errorf("client: release: %w", ErrPermitLost))
		}
	})
}

func (c *Client) permitError(desc map[string]string, err error) {
	if c.cfg.OnPermitError != nil {
		c.cfg.OnPermitError(maps.Clone(desc), err)
	}
}

// renewers counts the renewer goroutines so that Shutdown waits for them.
// closed, set by Shutdown under mu, keeps a late Acquire from adding to wg
// while Shutdown waits.
type renewers struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// add counts one more renewer, or reports false once closing.
func (r *renewers) add() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.wg.Add(1)
	return true
}

// close refuses new renewers; the caller then ends the running ones (by
// cancelling the Client's life) and waits on wg.
func (r *renewers) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
}
