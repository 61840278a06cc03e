package grpclimittest

import (
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// MaxRawMsgBytes is the largest message a DialRaw connection sends or
// receives: above every server's MaxRecvMsgBytes, so that an oversized
// request reaches the server and is refused there, not by the client.
const MaxRawMsgBytes = 64 << 20

// Serve starts a gRPC server built with opts on 127.0.0.1 at a free port,
// lets register add its services to it, and serves until the test ends,
// when the server stops and its goroutine has returned (a Serve error is
// reported then). It returns the address.
func Serve(t testing.TB, opts []grpc.ServerOption, register func(*grpc.Server)) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(opts...)
	register(s)
	served := make(chan error, 1)
	go func() { served <- s.Serve(lis) }()
	t.Cleanup(func() {
		s.Stop()
		if err := <-served; err != nil {
			t.Errorf("grpclimittest: serve: %v", err)
		}
	})
	return lis.Addr().String()
}

// DialRaw returns a plaintext connection to addr, closed when the test
// ends, whose calls send a *[]byte request as the bytes it holds and decode
// the answer into a proto.Message (RawCodec), up to MaxRawMsgBytes each way.
func DialRaw(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(RawCodec{}),
			grpc.MaxCallSendMsgSize(MaxRawMsgBytes), grpc.MaxCallRecvMsgSize(MaxRawMsgBytes)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// RawCodec is a client codec that sends a *[]byte as it is, so a test can
// put any bytes on the wire, and decodes answers as protobuf. It names
// itself "proto", so servers take its requests for protobuf ones.
type RawCodec struct{}

// Name is "proto".
func (RawCodec) Name() string { return "proto" }

// Marshal returns the bytes v (a *[]byte) holds.
func (RawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

// Unmarshal decodes data into v, a proto.Message.
func (RawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}
