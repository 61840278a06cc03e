package server

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/grpclimit"
	"github.com/weirhq/weir/limiter"
)

// newCodec is the gRPC codec of the public server: weir.v1 requests are
// checked against the API limits on the wire before they are decoded
// (scanRequest, scanBatch), then decoded by hand (decodeFor, decode.go),
// and the service answers a refusal with grpclimit.Refusal.
func newCodec() *grpclimit.Codec {
	return grpclimit.NewCodec(func(v any) grpclimit.Check {
		switch v.(type) {
		case *weirv1.DecideRequest:
			return scanRequest
		case *weirv1.DecideBatchRequest:
			return scanBatch
		case *weirv1.HoldRequest:
			return scanHold
		case *weirv1.ReleaseRequest, *weirv1.RenewRequest, *weirv1.SettleRequest:
			return scanOp
		}
		return nil
	}).WithDecoders(decodeFor)
}

// scanBatch checks a DecideBatchRequest's wire form against the API limits
// without allocating: at most limiter.MaxBatch requests, each passing
// scanRequest. It keeps a forged batch of millions of tiny descriptors
// from being decoded into maps first and refused after.
func scanBatch(b []byte) error {
	n := 0
	return grpclimit.ScanFields(b, func(num protowire.Number, typ protowire.Type, req []byte) error {
		if num != 1 || typ != protowire.BytesType {
			return nil
		}
		if n++; n > limiter.MaxBatch {
			return fmt.Errorf("%w: more than %d requests in one batch", limiter.ErrInvalidRequest, limiter.MaxBatch)
		}
		if err := scanRequest(req); err != nil {
			return fmt.Errorf("request %d: %w", n-1, err)
		}
		return nil
	})
}

// scanRequest checks a DecideRequest's wire form: at most
// MaxDecideRequestBytes (else grpclimit.ErrTooLarge) and at most
// limiter.MaxDescriptors descriptors.
func scanRequest(b []byte) error {
	if len(b) > MaxDecideRequestBytes {
		return fmt.Errorf("%w: request of %d bytes exceeds the largest valid request, %d bytes", grpclimit.ErrTooLarge, len(b), MaxDecideRequestBytes)
	}
	n := 0
	return grpclimit.ScanFields(b, func(num protowire.Number, _ protowire.Type, _ []byte) error {
		if num != 1 {
			return nil
		}
		if n++; n > limiter.MaxDescriptors {
			return fmt.Errorf("%w: more than %d descriptors", limiter.ErrInvalidRequest, limiter.MaxDescriptors)
		}
		return nil
	})
}

// MaxHoldEntries bounds the lookups and the items of one weir.v1.Leases
// HoldRequest on the wire, before it is decoded (clientlease's own
// bounds, at most these, apply after).
const MaxHoldEntries = limiter.MaxBatch

// scanHold checks a HoldRequest's wire form without allocating: at most
// MaxHoldEntries lookups and items, each with at most
// limiter.MaxDescriptors descriptors, so that a forged request of
// millions of tiny entries is refused before it becomes maps.
func scanHold(b []byte) error {
	var lookups, items int
	return grpclimit.ScanFields(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if typ != protowire.BytesType || (num != 2 && num != 3) {
			return nil
		}
		what, n := "lookups", &lookups
		if num == 3 {
			what, n = "items", &items
		}
		if *n++; *n > MaxHoldEntries {
			return fmt.Errorf("%w: more than %d %s in one hold request", limiter.ErrInvalidRequest, MaxHoldEntries, what)
		}
		descriptors := 0
		return grpclimit.ScanFields(v, func(num protowire.Number, _ protowire.Type, _ []byte) error {
			if num != 1 {
				return nil
			}
			if descriptors++; descriptors > limiter.MaxDescriptors {
				return fmt.Errorf("%w: %s[%d]: more than %d descriptors", limiter.ErrInvalidRequest, what, *n-1, limiter.MaxDescriptors)
			}
			return nil
		})
	})
}
