package server

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/limiter"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// startGRPC serves RegisterGRPC(d) on a real loopback socket and returns a
// connection to it; both stop when the test ends.
func startGRPC(t testing.TB, d Decider) (*grpc.ClientConn, *health.Server) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	hs := RegisterGRPC(s, d, nil)
	served := make(chan error, 1)
	go func() { served <- s.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		s.Stop()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return conn, hs
}

// withUnknownField returns m with field 99 appended to its wire form, as a
// newer client would send it.
func withUnknownField[M proto.Message](t *testing.T, m M) M {
	t.Helper()
	raw, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	raw = protowire.AppendTag(raw, 99, protowire.VarintType)
	raw = protowire.AppendVarint(raw, 7)
	out := m.ProtoReflect().New().Interface().(M)
	if err := proto.Unmarshal(raw, out); err != nil {
		t.Fatal(err)
	}
	if len(out.ProtoReflect().GetUnknown()) == 0 {
		t.Fatal("unknown field was not kept")
	}
	return out
}

func wantCode(t *testing.T, err error, code codes.Code, msg string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != code || !strings.Contains(st.Message(), msg) {
		t.Errorf("status = %v %q, want %v containing %q", st.Code(), st.Message(), code, msg)
	}
}

func TestGRPC_Decide_roundTrip(t *testing.T) {
	conn, _ := startGRPC(t, &fakeDecider{})
	c := weirv1.NewRateLimiterClient(conn)
	ctx := withTimeout(t)

	got, err := c.Decide(ctx, &weirv1.DecideRequest{Descriptors: map[string]string{"user": "u1"}, Cost: new(int64(2))})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := fakeDecision(ctx, limiter.Request{Descriptors: map[string]string{"user": "u1"}, Cost: 2})
	if !proto.Equal(got, ToProto(want)) {
		t.Errorf("Decide = %v, want %v", got, ToProto(want))
	}

	denied, err := c.Decide(ctx, &weirv1.DecideRequest{Descriptors: map[string]string{"user": "blocked"}})
	if err != nil {
		t.Fatal(err)
	}
	if denied.Allowed || denied.RetryAfter.AsDuration() != 1500*time.Millisecond || len(denied.Limits) != 2 {
		t.Errorf("Decide(blocked) = %v, want a denial retrying after 1.5s", denied)
	}
}

func TestGRPC_DecideBatch_roundTrip(t *testing.T) {
	d := &fakeDecider{}
	conn, _ := startGRPC(t, d)
	got, err := weirv1.NewRateLimiterClient(conn).DecideBatch(withTimeout(t), &weirv1.DecideBatchRequest{
		Requests: []*weirv1.DecideRequest{
			{Descriptors: map[string]string{"user": "u1"}},
			{Descriptors: map[string]string{"user": "blocked"}},
			{Descriptors: map[string]string{"user": "u2"}, Cost: new(int64(11))},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var allowed []bool
	for _, r := range got.Responses {
		allowed = append(allowed, r.Allowed)
	}
	if !slices.Equal(allowed, []bool{true, false, false}) || !got.Responses[2].TooCostly {
		t.Errorf("DecideBatch = %v, want allowed, denied, too costly", got)
	}
	if n := d.callCount(); n != 3 {
		t.Errorf("decided %d requests, want 3", n)
	}
}

func TestGRPC_Decide_invalidArgument(t *testing.T) {
	d := &fakeDecider{}
	conn, _ := startGRPC(t, d)
	c := weirv1.NewRateLimiterClient(conn)
	ctx := withTimeout(t)

	_, err := c.Decide(ctx, &weirv1.DecideRequest{Descriptors: map[string]string{"fail": "invalid"}})
	wantCode(t, err, codes.InvalidArgument, `unknown descriptor "fail"`)

	_, err = c.Decide(ctx, &weirv1.DecideRequest{Cost: new(int64(-1))})
	wantCode(t, err, codes.InvalidArgument, "cost -1 must be at least 1")

	_, err = c.Decide(ctx, &weirv1.DecideRequest{Descriptors: map[string]string{"user": "u1"}, Cost: new(int64(0))})
	wantCode(t, err, codes.InvalidArgument, "cost 0 must be at least 1")

	_, err = c.Decide(ctx, withUnknownField(t, &weirv1.DecideRequest{Cost: new(int64(1))}))
	wantCode(t, err, codes.InvalidArgument, "unknown fields")

	if n := d.callCount(); n != 1 {
		t.Errorf("decider asked %d times, want 1 (only the limiter-refused request)", n)
	}
}

func TestGRPC_DecideBatch_invalidArgument(t *testing.T) {
	d := &fakeDecider{}
	conn, _ := startGRPC(t, d)
	c := weirv1.NewRateLimiterClient(conn)
	ctx := withTimeout(t)

	tooMany := make([]*weirv1.DecideRequest, limiter.MaxBatch+1)
	for i := range tooMany {
		tooMany[i] = &weirv1.DecideRequest{}
	}
	_, err := c.DecideBatch(ctx, &weirv1.DecideBatchRequest{Requests: tooMany})
	wantCode(t, err, codes.InvalidArgument, "1001 requests in one batch")

	_, err = c.DecideBatch(ctx, &weirv1.DecideBatchRequest{Requests: []*weirv1.DecideRequest{
		{}, withUnknownField(t, &weirv1.DecideRequest{}),
	}})
	wantCode(t, err, codes.InvalidArgument, "requests[1]: invalid request: unknown fields")

	_, err = c.DecideBatch(ctx, withUnknownField(t, &weirv1.DecideBatchRequest{Requests: []*weirv1.DecideRequest{{}}}))
	wantCode(t, err, codes.InvalidArgument, "unknown fields")

	_, err = c.DecideBatch(ctx, &weirv1.DecideBatchRequest{Requests: []*weirv1.DecideRequest{{}, {Cost: new(int64(-3))}}})
	wantCode(t, err, codes.InvalidArgument, "requests[1]: invalid request: cost -3 must be at least 1")

	_, err = c.DecideBatch(ctx, &weirv1.DecideBatchRequest{Requests: []*weirv1.DecideRequest{{}, {Cost: new(int64(0))}}})
	wantCode(t, err, codes.InvalidArgument, "requests[1]: invalid request: cost 0 must be at least 1")

	if n := d.callCount(); n != 0 {
		t.Errorf("decider asked %d times for invalid batches, want 0", n)
	}
	full := slices.Repeat([]*weirv1.DecideRequest{{}}, limiter.MaxBatch)
	if got, err := c.DecideBatch(ctx, &weirv1.DecideBatchRequest{Requests: full}); err != nil || len(got.Responses) != limiter.MaxBatch {
		t.Errorf("a batch of exactly MaxBatch: %d responses, %v", len(got.GetResponses()), err)
	}
}

func TestGRPCService_errorCodes(t *testing.T) {
	svc := NewGRPCService(&fakeDecider{}, nil)
	tests := []struct {
		fail string
		want codes.Code
	}{
		{"invalid", codes.InvalidArgument},
		{"down", codes.Unavailable},
		{"deadline", codes.DeadlineExceeded},
		{"canceled", codes.Canceled},
	}
	for _, tt := range tests {
		req := &weirv1.DecideRequest{Descriptors: map[string]string{"fail": tt.fail}}
		_, err := svc.Decide(context.Background(), req)
		if got := status.Code(err); got != tt.want {
			t.Errorf("Decide(fail=%s) code = %v, want %v", tt.fail, got, tt.want)
		}
		_, err = svc.DecideBatch(context.Background(), &weirv1.DecideBatchRequest{Requests: []*weirv1.DecideRequest{req}})
		if got := status.Code(err); got != tt.want {
			t.Errorf("DecideBatch(fail=%s) code = %v, want %v", tt.fail, got, tt.want)
		}
	}
}

func TestGRPCService_DecideBatch_brokenDecider(t *testing.T) {
	svc := NewGRPCService(&fakeDecider{batchShort: true}, nil)
	_, err := svc.DecideBatch(context.Background(), &weirv1.DecideBatchRequest{Requests: []*weirv1.DecideRequest{{}, {}}})
	wantCode(t, err, codes.Internal, "1 decisions for 2 requests")
}

func TestGRPCService_DecideBatch_empty(t *testing.T) {
	d := &fakeDecider{}
	got, err := NewGRPCService(d, nil).DecideBatch(context.Background(), &weirv1.DecideBatchRequest{})
	if err != nil || len(wireBatch(t, got).Responses) != 0 || d.callCount() != 0 {
		t.Errorf("empty batch = %v, %v after %d calls; want an empty answer without asking", got, err, d.callCount())
	}
}

func TestGRPC_Decide_deadline(t *testing.T) {
	conn, _ := startGRPC(t, &fakeDecider{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := weirv1.NewRateLimiterClient(conn).Decide(ctx, &weirv1.DecideRequest{Descriptors: map[string]string{"fail": "block"}})
	wantCode(t, err, codes.DeadlineExceeded, "")
}

func TestRegisterGRPC_health(t *testing.T) {
	conn, hs := startGRPC(t, &fakeDecider{})
	c := healthpb.NewHealthClient(conn)
	ctx := withTimeout(t)
	for _, svc := range []string{"", "weir.v1.RateLimiter"} {
		res, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || res.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("Check(%q) = %v, %v; want SERVING", svc, res, err)
		}
	}
	hs.Shutdown()
	res, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || res.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("after Shutdown, Check = %v, %v; want NOT_SERVING", res, err)
	}
}

func TestRegisterGRPC_reflectionListsService(t *testing.T) {
	conn, _ := startGRPC(t, &fakeDecider{})
	ctx, cancel := context.WithCancel(withTimeout(t))
	defer cancel()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range res.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range []string{"weir.v1.RateLimiter", "grpc.health.v1.Health"} {
		if !slices.Contains(names, want) {
			t.Errorf("reflection lists %v, want %s among them", names, want)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
}

// An absent cost is the API's default of 1; only an explicit cost below 1 is
// refused.
func TestGRPC_Decide_absentCostIsOne(t *testing.T) {
	d := &fakeDecider{}
	conn, _ := startGRPC(t, d)
	c := weirv1.NewRateLimiterClient(conn)
	ctx := withTimeout(t)
	if _, err := c.Decide(ctx, &weirv1.DecideRequest{Descriptors: map[string]string{"user": "u1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DecideBatch(ctx, &weirv1.DecideBatchRequest{Requests: []*weirv1.DecideRequest{{Descriptors: map[string]string{"user": "u1"}}}}); err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.calls) != 2 || d.calls[0].Cost != 1 || d.calls[1].Cost != 1 {
		t.Fatalf("decider saw %+v, want two requests of cost 1", d.calls)
	}
}
