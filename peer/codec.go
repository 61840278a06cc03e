package peer

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	peerv1 "github.com/weirhq/weir/api/weir/peer/v1"
	"github.com/weirhq/weir/grpclimit"
)

// newCodec is the gRPC codec of the peer server: a weir.peer.v1
// DecideRequest's or DecideBatch's wire form is scanned before it is decoded (scanRequest),
// so a forged request of millions of tiny entries is refused before it
// becomes millions of objects, and the server answers a refusal or a
// malformed request with grpclimit.Refusal (INVALID_ARGUMENT) instead of
// gRPC's INTERNAL. Other messages, including the node-to-node services
// added beside Peer, decode as usual.
func newCodec() *grpclimit.Codec {
	return grpclimit.NewCodec(func(v any) grpclimit.Check {
		switch v.(type) {
		case *peerv1.DecideRequest:
			return scanRequest
		case *peerv1.DecideBatch:
			return scanBatch
		}
		return nil
	})
}

// scanBatch checks a DecideBatch as scanRequest does a DecideRequest (its
// items have the same field number), and refuses one larger than
// MaxStreamBatchBytes.
func scanBatch(b []byte) error {
	if len(b) > MaxStreamBatchBytes {
		return fmt.Errorf("%w: decide batch of %d bytes exceeds %d", grpclimit.ErrTooLarge, len(b), MaxStreamBatchBytes)
	}
	return scanRequest(b)
}

// errTooMany is a request or item with more entries than any valid one.
var errTooMany = errors.New("peer: too many entries")

// scanRequest counts a DecideRequest's items (at most MaxItems), and each
// item's keys and limits (at most DefaultMaxKeys each), on the wire
// without allocating. An item's op must carry an id of exactly 16 bytes.
func scanRequest(b []byte) error {
	items := 0
	return grpclimit.ScanFields(b, func(num protowire.Number, typ protowire.Type, item []byte) error {
		if num != 1 || typ != protowire.BytesType {
			return nil
		}
		if items++; items > MaxItems {
			return fmt.Errorf("%w: more than %d items", errTooMany, MaxItems)
		}
		return scanItem(item, items-1)
	})
}

// errBadOp is an item's op without a 16-byte id.
var errBadOp = errors.New("peer: malformed op")

// scanItem checks item number n of a request.
func scanItem(item []byte, n int) error {
	keys, limits := 0, 0
	return grpclimit.ScanFields(item, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case 2:
			keys++
		case 3:
			limits++
		case 10:
			if err := scanOp(v); err != nil {
				return fmt.Errorf("item %d: %w", n, err)
			}
		}
		if keys > DefaultMaxKeys || limits > DefaultMaxKeys {
			return fmt.Errorf("%w: item %d has more than %d keys or limits", errTooMany, n, DefaultMaxKeys)
		}
		return nil
	})
}

// scanOp requires every id of an Op to be 16 bytes, and one to be there.
// (The wire may repeat an op: proto merges them, and each is checked.)
func scanOp(op []byte) error {
	ids := 0
	err := grpclimit.ScanFields(op, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != 2 || typ != protowire.BytesType {
			return nil
		}
		if ids++; len(v) != 16 {
			return fmt.Errorf("%w: id of %d bytes, not 16", errBadOp, len(v))
		}
		return nil
	})
	if err == nil && ids == 0 {
		err = fmt.Errorf("%w: no id", errBadOp)
	}
	return err
}
