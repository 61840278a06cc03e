package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/ticket"
)

// ErrNegativeTTL is returned by Renew for a ttl below zero.
var ErrNegativeTTL = errors.New("client: negative ttl")

// Settlement is the owner's answer to Settle (weir.v1 SettleResponse).
type Settlement struct {
	// Settled is false when the owner held no such reservation (settled
	// before, expired, or lost with a crashed owner): nothing changed.
	Settled bool
	// Refunded is the units given back (actual below the reservation),
	// the fewest over the reservation's limits.
	Refunded int64
	// Extra is the units charged beyond the reservation (actual above
	// it), the most over its limits.
	Extra int64
	// Forgiven is the units of the excess not charged: a key goes at most
	// one burst into debt.
	Forgiven int64
}

// Reserve asks, with one Decide RPC (reserve: true, cost maxCost; 0 means
// 1), whether a request that may cost up to maxCost units may pass, and
// when admitted keeps the charge as a reservation that settle charges its
// actual cost once known: units below maxCost are refunded (as far as
// the limit allows), units above it charged. Like Acquire it is never
// batched nor decided from leases, and routes by descriptors.
//
// settle is never nil. When the answer carries a reservation
// (DecideResponse.reservation) it is Settle with that token; call it once
// (a second call finds nothing: Settled false). An unsettled reservation
// stays charged as reserved. Denied, admitted without a reservation (a
// fallback, or no rate limit matched), or on error, settle sends nothing
// and returns a zero Settlement. resp and err are as for Decide; a
// negative maxCost is ErrNegativeCost. Safe for concurrent use.
func (c *Client) Reserve(ctx context.Context, descriptors map[string]string, maxCost int64) (settle func(ctx context.Context, actual int64) (Settlement, error), resp *weirv1.DecideResponse, err error) {
	settle = noSettle
	if maxCost < 0 {
		return settle, nil, fmt.Errorf("client: reserve: %w: %d", ErrNegativeCost, maxCost)
	}
	req := &weirv1.DecideRequest{Descriptors: descriptors, Cost: weirv1.DefaultCost(maxCost), Reserve: true}
	resp, err = c.decideDirect(ctx, "reserve", req)
	if tok := resp.GetReservation(); err == nil && resp.GetAllowed() && len(tok) > 0 {
		settle = func(ctx context.Context, actual int64) (Settlement, error) { return c.Settle(ctx, tok, actual) }
	}
	return settle, resp, err
}

func noSettle(_ context.Context, actual int64) (Settlement, error) {
	if actual < 0 {
		return Settlement{}, fmt.Errorf("client: settle: %w: %d", ErrNegativeCost, actual)
	}
	return Settlement{}, nil
}

// Release gives back the slots of permit (DecideResponse.permit) at once.
// released is false when the owner held no such permit (released
// before, expired, lost): nothing changed, and no error. A malformed
// token is an INVALID_ARGUMENT error. With Config.Route the call goes to
// the owner of the token's group (to Target when the client cannot place
// it); never batched. Other errors are as for Decide. Safe for concurrent
// use.
func (c *Client) Release(ctx context.Context, permit []byte) (released bool, err error) {
	resp, err := callToken(c, ctx, "release", permit,
		func(ctx context.Context, rpc weirv1.RateLimiterClient) (*weirv1.ReleaseResponse, error) {
			return rpc.Release(ctx, &weirv1.ReleaseRequest{Permit: permit})
		})
	return resp.GetReleased(), err
}

// Renew extends permit's life to ttl from now (0: the limit's ttl; at
// most that). renewed is false when the owner holds no such permit;
// expiresIn is then 0. Routing and errors are as for Release; a negative
// ttl is ErrNegativeTTL. Acquire renews its permits itself. Safe for
// concurrent use.
func (c *Client) Renew(ctx context.Context, permit []byte, ttl time.Duration) (expiresIn time.Duration, renewed bool, err error) {
	if ttl < 0 {
		return 0, false, fmt.Errorf("client: renew: %w: %v", ErrNegativeTTL, ttl)
	}
	req := &weirv1.RenewRequest{Permit: permit}
	if ttl > 0 {
		req.Ttl = durationpb.New(ttl)
	}
	resp, err := callToken(c, ctx, "renew", permit,
		func(ctx context.Context, rpc weirv1.RateLimiterClient) (*weirv1.RenewResponse, error) {
			return rpc.Renew(ctx, req)
		})
	if !resp.GetRenewed() {
		return 0, false, err
	}
	return resp.GetExpiresIn().AsDuration(), true, err
}

// Settle charges reservation (DecideResponse.reservation) its actual cost
// (>= 0; a negative one is ErrNegativeCost and sends nothing). An unknown
// or expired reservation answers Settled: false. A Settle whose answer was
// lost and is sent again answers Settled: false, though the first one
// settled. Routing and errors are as for Release. Safe for concurrent
// use.
func (c *Client) Settle(ctx context.Context, reservation []byte, actual int64) (Settlement, error) {
	if actual < 0 {
		return Settlement{}, fmt.Errorf("client: settle: %w: %d", ErrNegativeCost, actual)
	}
	resp, err := callToken(c, ctx, "settle", reservation,
		func(ctx context.Context, rpc weirv1.RateLimiterClient) (*weirv1.SettleResponse, error) {
			return rpc.Settle(ctx, &weirv1.SettleRequest{Reservation: reservation, Actual: actual})
		})
	if err != nil {
		return Settlement{}, err
	}
	return Settlement{Settled: resp.GetSettled(), Refunded: resp.GetRefunded(), Extra: resp.GetExtra(), Forgiven: resp.GetForgiven()}, nil
}

// callToken makes one call on a token under Config.Timeout, to the owner
// of the token's group when the client routes (re-sent through Target
// when that member is UNAVAILABLE, as decideOne does: the three
// operations are safe to repeat), else to Target.
func callToken[T any](c *Client, ctx context.Context, op string, token []byte,
	call func(context.Context, weirv1.RateLimiterClient) (T, error),
) (T, error) {
	var zero T
	if c.life.Err() != nil {
		return zero, ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	rctx, rcancel := c.bindLife(ctx)
	defer rcancel()
	if to := c.pickToken(token); to != nil && to.acquire() {
		resp, err := call(rctx, to.rpc)
		to.release()
		if !c.fallBack(rctx, to, err) {
			return resp, c.callError(ctx, op, err)
		}
	}
	resp, err := call(rctx, c.rpc)
	return resp, c.callError(ctx, op, err)
}

// pickToken returns the connection of the owner of token's group, or nil
// (Target) when the client does not route or cannot read the group: the
// token is opaque, and a node tells a malformed one from a newer format.
func (c *Client) pickToken(token []byte) *memberConn {
	if c.router == nil {
		return nil
	}
	g, err := ticket.Group(token)
	if err != nil {
		return nil
	}
	return c.router.pickGroup(g)
}

func isInvalid(err error) bool { return status.Code(err) == codes.InvalidArgument }
