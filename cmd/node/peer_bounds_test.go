package main

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	peerv1 "github.com/weirhq/weir/api/weir/peer/v1"
	"github.com/weirhq/weir/grpclimit/grpclimittest"
	"github.com/weirhq/weir/peer"
)

// TestNode_peerServerBounded: the node's peer server runs with
// peer.DefaultServerConfig: malformed protobuf is INVALID_ARGUMENT (not
// INTERNAL) and a message over peer.MaxRequestBytes is refused unread.
func TestNode_peerServerBounded(t *testing.T) {
	n, err := launch(t)
	if err != nil {
		t.Fatal(err)
	}
	conn := grpclimittest.DialRaw(t, n.peerAddr())
	for name, tc := range map[string]struct {
		raw  []byte
		code codes.Code
	}{
		"invalid UTF-8 sender": {[]byte{0x12, 0x01, 0xc3}, codes.InvalidArgument},
		"garbage":              {[]byte{0xff, 0xff, 0xff, 0xff, 0x0f}, codes.InvalidArgument},
		"oversized":            {append([]byte{0x12, 0x80, 0x80, 0x80, 0x08}, make([]byte, peer.MaxRequestBytes)...), codes.ResourceExhausted},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var out peerv1.DecideResponse
		err := conn.Invoke(ctx, "/weir.peer.v1.Peer/Decide", &tc.raw, &out)
		cancel()
		if status.Code(err) != tc.code {
			t.Errorf("%s: %v, want %v", name, err, tc.code)
		}
	}
}
