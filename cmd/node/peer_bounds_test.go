package main

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	peerv1 "github.com/weirhq/weir/api/weir/peer/v1"
	"github.com/weirhq/weir/peer"
)

// rawBytesCodec puts []byte on the wire as they are.
type rawBytesCodec struct{}

func (rawBytesCodec) Name() string { return "proto" }
func (rawBytesCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}
func (rawBytesCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

// TestNode_peerServerBounded: the node's peer server runs with
// peer.DefaultServerConfig: malformed protobuf is INVALID_ARGUMENT (not
// INTERNAL) and a message over peer.MaxRequestBytes is refused unread.
func TestNode_peerServerBounded(t *testing.T) {
	n, err := launch(t)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(n.peerAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawBytesCodec{}), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
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
