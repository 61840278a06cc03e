package grpclimittest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/weirhq/weir/grpclimit/grpclimittest"
)

// The bytes a test gives go on the wire as they are: a valid request is
// answered, garbage reaches the server's codec, and a message over the
// server's limit (gRPC's default 4 MiB here) is refused by the server, not
// held back by the client.
func TestDialRaw_sendsBytesAsTheyAre(t *testing.T) {
	hs := health.NewServer()
	hs.SetServingStatus("weir", healthpb.HealthCheckResponse_NOT_SERVING)
	addr := grpclimittest.Serve(t, nil, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, hs) })
	conn := grpclimittest.DialRaw(t, addr)
	call := func(raw []byte) (*healthpb.HealthCheckResponse, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		var out healthpb.HealthCheckResponse
		err := conn.Invoke(ctx, "/grpc.health.v1.Health/Check", &raw, &out)
		return &out, err
	}
	valid, err := proto.Marshal(&healthpb.HealthCheckRequest{Service: "weir"})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := call(valid); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("valid request: %v, %v; want NOT_SERVING", resp, err)
	}
	for name, tc := range map[string]struct {
		raw  []byte
		code codes.Code
		msg  string // from the server
	}{
		"garbage":  {[]byte{0xff, 0xff, 0xff, 0xff, 0x0f}, codes.Internal, "unmarshal"}, // gRPC's own codec
		"oversize": {make([]byte, 4<<20+1), codes.ResourceExhausted, "received message larger than max"},
	} {
		if _, err := call(tc.raw); status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want %v from the server (%q)", name, err, tc.code, tc.msg)
		}
	}
}
