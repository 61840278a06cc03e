package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/grpclimit"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/ticket"
)

// Operator is what the Release, Renew and Settle transports need from the
// limiter core; *limiter.Limiter implements it. A Decider that does not
// implement it answers those calls gRPC UNIMPLEMENTED and HTTP 501. Errors
// map as a Decider's: limiter.ErrInvalidRequest (a malformed token, the
// wrong kind of token, a bad ttl or actual cost) is INVALID_ARGUMENT and
// HTTP 400, a store failure (the owner unreachable) UNAVAILABLE and 503.
// Implementations must be safe for concurrent use.
type Operator interface {
	Release(ctx context.Context, token []byte) (bool, error)
	Renew(ctx context.Context, token []byte, ttl time.Duration) (limiter.Renewal, error)
	Settle(ctx context.Context, token []byte, actual int64) (limiter.Settlement, error)
}

var _ Operator = (*limiter.Limiter)(nil)

// errNoOperator answers the token operations of a Decider that is not an
// Operator.
var errNoOperator = errors.New("server: this node does not serve release, renew or settle")

// operator returns d as an Operator, or errNoOperator.
func operator(d Decider) (Operator, error) {
	if o, ok := d.(Operator); ok {
		return o, nil
	}
	return nil, errNoOperator
}

// checkOp refuses an operation request with fields this node does not
// know, or a token longer than any token (ticket.MaxBytes).
func checkOp(m proto.Message, token []byte) error {
	if len(m.ProtoReflect().GetUnknown()) > 0 {
		return fmt.Errorf("%w: unknown fields", limiter.ErrInvalidRequest)
	}
	if len(token) > ticket.MaxBytes {
		return fmt.Errorf("%w: token of %d bytes exceeds %d", limiter.ErrInvalidRequest, len(token), ticket.MaxBytes)
	}
	return nil
}

func release(ctx context.Context, d Decider, in *weirv1.ReleaseRequest) (*weirv1.ReleaseResponse, error) {
	o, err := operator(d)
	if err != nil {
		return nil, err
	}
	if err := checkOp(in, in.GetPermit()); err != nil {
		return nil, err
	}
	ok, err := o.Release(ctx, in.GetPermit())
	if err != nil {
		return nil, err
	}
	return &weirv1.ReleaseResponse{Released: ok}, nil
}

func renew(ctx context.Context, d Decider, in *weirv1.RenewRequest) (*weirv1.RenewResponse, error) {
	o, err := operator(d)
	if err != nil {
		return nil, err
	}
	if err := checkOp(in, in.GetPermit()); err != nil {
		return nil, err
	}
	var ttl time.Duration
	if t := in.GetTtl(); t != nil {
		if err := t.CheckValid(); err != nil {
			return nil, fmt.Errorf("%w: ttl: %v", limiter.ErrInvalidRequest, err)
		}
		ttl = t.AsDuration()
	}
	r, err := o.Renew(ctx, in.GetPermit(), ttl)
	if err != nil {
		return nil, err
	}
	out := &weirv1.RenewResponse{Renewed: r.Renewed}
	if r.ExpiresIn != 0 {
		out.ExpiresIn = durationpb.New(r.ExpiresIn)
	}
	return out, nil
}

func settle(ctx context.Context, d Decider, in *weirv1.SettleRequest) (*weirv1.SettleResponse, error) {
	o, err := operator(d)
	if err != nil {
		return nil, err
	}
	if err := checkOp(in, in.GetReservation()); err != nil {
		return nil, err
	}
	s, err := o.Settle(ctx, in.GetReservation(), in.GetActual())
	if err != nil {
		return nil, err
	}
	return &weirv1.SettleResponse{Settled: s.Settled, Refunded: s.Refunded, Extra: s.Extra, Forgiven: s.Forgiven}, nil
}

func (g *grpcService) Release(ctx context.Context, in *weirv1.ReleaseRequest) (*weirv1.ReleaseResponse, error) {
	if err := grpclimit.Refusal(in); err != nil {
		return nil, err
	}
	out, err := release(ctx, g.d, in)
	if err != nil {
		return nil, g.toStatus("Release", err)
	}
	return out, nil
}

func (g *grpcService) Renew(ctx context.Context, in *weirv1.RenewRequest) (*weirv1.RenewResponse, error) {
	if err := grpclimit.Refusal(in); err != nil {
		return nil, err
	}
	out, err := renew(ctx, g.d, in)
	if err != nil {
		return nil, g.toStatus("Renew", err)
	}
	return out, nil
}

func (g *grpcService) Settle(ctx context.Context, in *weirv1.SettleRequest) (*weirv1.SettleResponse, error) {
	if err := grpclimit.Refusal(in); err != nil {
		return nil, err
	}
	out, err := settle(ctx, g.d, in)
	if err != nil {
		return nil, g.toStatus("Settle", err)
	}
	return out, nil
}

func (a *httpAPI) release(w http.ResponseWriter, r *http.Request) {
	in := &weirv1.ReleaseRequest{}
	if !a.readBody(w, r, in, max(a.cfg.MaxBodyBytes, MaxOpBodyBytes)) {
		return
	}
	out, err := release(r.Context(), a.d, in)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeProto(w, http.StatusOK, out)
}

func (a *httpAPI) renew(w http.ResponseWriter, r *http.Request) {
	in := &weirv1.RenewRequest{}
	if !a.readBody(w, r, in, max(a.cfg.MaxBodyBytes, MaxOpBodyBytes)) {
		return
	}
	out, err := renew(r.Context(), a.d, in)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if out.ExpiresIn == nil {
		out.ExpiresIn = &durationpb.Duration{} // "0s", not null (see zeroDurations)
	}
	a.writeProto(w, http.StatusOK, out)
}

func (a *httpAPI) settle(w http.ResponseWriter, r *http.Request) {
	in := &weirv1.SettleRequest{}
	if !a.readBody(w, r, in, max(a.cfg.MaxBodyBytes, MaxOpBodyBytes)) {
		return
	}
	out, err := settle(r.Context(), a.d, in)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeProto(w, http.StatusOK, out)
}

// scanOp checks a ReleaseRequest's, RenewRequest's or SettleRequest's wire
// form: at most MaxOpRequestBytes (else grpclimit.ErrTooLarge), and a token
// (field 1 of each) of at most ticket.MaxBytes.
func scanOp(b []byte) error {
	if len(b) > MaxOpRequestBytes {
		return fmt.Errorf("%w: request of %d bytes exceeds the largest valid request, %d bytes", grpclimit.ErrTooLarge, len(b), MaxOpRequestBytes)
	}
	return grpclimit.ScanFields(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num == 1 && typ == protowire.BytesType && len(v) > ticket.MaxBytes {
			return fmt.Errorf("%w: token of %d bytes exceeds %d", limiter.ErrInvalidRequest, len(v), ticket.MaxBytes)
		}
		return nil
	})
}
