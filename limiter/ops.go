package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/limitkey"
	"github.com/weirhq/weir/ticket"
)

// Renewal is the answer to Renew.
type Renewal struct {
	// Renewed is false when the owner held no such permit (released,
	// expired, lost with a crashed owner, or its limits are gone from the
	// policy): nothing changed.
	Renewed bool
	// ExpiresIn is the time until the renewed permit expires.
	ExpiresIn time.Duration
}

// Settlement is the answer to Settle.
type Settlement struct {
	// Settled is false when the owner held no such reservation (settled
	// before, expired, lost with a crashed owner, or its limits are gone
	// from the policy): nothing changed.
	Settled bool
	// Refunded is the fewest units refunded over the reservation's
	// limits; Extra and Forgiven the most charged beyond it and forgiven
	// (see gcra.Settle).
	Refunded, Extra, Forgiven int64
}

// Release gives back the slots of a permit token (Decision.Permit) at
// once and reports whether the owner held it. A malformed token, or a
// reservation token, is an error wrapping ErrInvalidRequest (and
// ticket.ErrMalformed when it does not decode) and changes nothing. A
// permit whose limits the current policy no longer has answers false
// without asking the store. A store failure is an *UnavailableError (no
// failure policy applies to an operation): the caller may retry.
func (l *Limiter) Release(ctx context.Context, token []byte) (bool, error) {
	g, err := l.op(ctx, token, ticket.Permit, decide.Op{Kind: decide.OpRelease})
	return g.Done, err
}

// Renew extends a permit's life to ttl from now (0: its limit's ttl) and
// reports its new time left. A negative ttl, or one over the ttl of a
// limit the permit holds, is an error wrapping ErrInvalidRequest; otherwise
// Renew answers and fails as Release does.
func (l *Limiter) Renew(ctx context.Context, token []byte, ttl time.Duration) (Renewal, error) {
	if ttl < 0 {
		return Renewal{}, fmt.Errorf("%w: renew ttl %s is negative", ErrInvalidRequest, ttl)
	}
	now := l.now().UnixNano()
	g, err := l.opAt(ctx, token, ticket.Permit, decide.Op{Kind: decide.OpRenew, TTL: int64(ttl)}, now)
	if err != nil || !g.Done {
		return Renewal{}, err
	}
	return Renewal{Renewed: true, ExpiresIn: nanos(max(0, g.Expiry-now))}, nil
}

// Settle charges a reservation token (Decision.Reservation) its actual
// cost: the unused part is refunded, an excess charged. actual must be in
// [0, MaxCost], else the error wraps ErrInvalidRequest; a permit token is
// refused the same way. Otherwise Settle answers and fails as Release does.
func (l *Limiter) Settle(ctx context.Context, token []byte, actual int64) (Settlement, error) {
	if actual < 0 || actual > MaxCost {
		return Settlement{}, fmt.Errorf("%w: actual cost %d outside [0, %d]", ErrInvalidRequest, actual, MaxCost)
	}
	g, err := l.op(ctx, token, ticket.Reservation, decide.Op{Kind: decide.OpSettle, Actual: actual})
	if err != nil || !g.Done {
		return Settlement{}, err
	}
	s := g.Settlement
	return Settlement{Settled: true, Refunded: s.Refunded, Extra: s.Extra, Forgiven: s.Forgiven}, nil
}

func (l *Limiter) op(ctx context.Context, token []byte, want ticket.Kind, op decide.Op) (decide.Grant, error) {
	return l.opAt(ctx, token, want, op, l.now().UnixNano())
}

// opAt decodes token, resolves its keys through the current policy and
// asks the store to apply op to them, stamped at now. Keys the policy no
// longer has are left out; with none left the answer is not done, and the
// store is not asked.
func (l *Limiter) opAt(ctx context.Context, token []byte, want ticket.Kind, op decide.Op, now int64) (decide.Grant, error) {
	t, err := ticket.Decode(token)
	if err != nil {
		return decide.Grant{}, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	if t.Kind != want {
		return decide.Grant{}, fmt.Errorf("%w: a %s token where a %s is needed", ErrInvalidRequest, t.Kind, want)
	}
	op.ID = t.ID
	req := decide.Request{Group: t.Group, Now: now, Op: &op}
	if err := l.resolveOp(&req, t, op); err != nil {
		return decide.Grant{}, err
	}
	if len(req.Keys) == 0 {
		return decide.Grant{}, nil // every limit of it is gone: nothing is held
	}
	var g decide.Grant
	req.Grant = &g
	if _, err := l.store.Decide(ctx, &req, make([]gcra.Result, len(req.Keys))); err != nil {
		l.metrics.storeErrors.Inc()
		if ctx.Err() != nil {
			return decide.Grant{}, fmt.Errorf("limiter: %w", err)
		}
		if _, ok := errors.AsType[*UnavailableError](err); !ok {
			err = &UnavailableError{Reason: ReasonStoreFailed, Err: err}
		}
		return decide.Grant{}, fmt.Errorf("limiter: %w", err)
	}
	return g, nil
}

// resolveOp fills req's Keys, Limits and Defs from t's keys and the current
// policy. A key of another group, or of a limit of the wrong kind for op
// (a permit's keys are concurrency limits', a reservation's rate limits'),
// is an error wrapping ErrInvalidRequest; a key no limit of the policy
// builds is skipped. A key whose numbers depend on a descriptor it does not
// carry (policy.KeyAmbiguous) takes the first set the policy gives; the
// owner's intake replaces them with its own anyway.
func (l *Limiter) resolveOp(req *decide.Request, t ticket.Ticket, op decide.Op) error {
	p := l.policies.Current()
	tag := limitkey.GroupTag(t.Group)
	for i, key := range t.Keys {
		if limitkey.HashTag(key) != tag {
			return fmt.Errorf("%w: token key %d is not of the token's group %q", ErrInvalidRequest, i, t.Group)
		}
		lim, set, _ := p.KeyLimit(key)
		if lim == nil || len(set) == 0 {
			continue
		}
		def := lim.Def()
		if def.Concurrency != (t.Kind == ticket.Permit) {
			return fmt.Errorf("%w: token key %d is limit %q's, not a %s limit's", ErrInvalidRequest, i, lim.Name, kindFor(t.Kind))
		}
		if _, ttl := decide.PermitLimit(set[0]); op.Kind == decide.OpRenew && op.TTL > ttl {
			return fmt.Errorf("%w: renew ttl %s exceeds limit %q's ttl %s", ErrInvalidRequest, nanos(op.TTL), lim.Name, nanos(ttl))
		}
		if most := gcra.MaxSpan / max(set[0].Interval, 1); op.Kind == decide.OpSettle && op.Actual > most {
			// A cost the key's schedule cannot hold: refused here, where
			// it is the caller's error, not at the owner as a failure.
			return fmt.Errorf("%w: actual cost %d exceeds limit %q's largest charge %d", ErrInvalidRequest, op.Actual, lim.Name, most)
		}
		req.Keys = append(req.Keys, key)
		req.Limits = append(req.Limits, set[0])
		req.Defs = append(req.Defs, def)
	}
	return nil
}

func kindFor(k ticket.Kind) string {
	if k == ticket.Permit {
		return KindConcurrency
	}
	return KindRate
}
