package server

import (
	"bytes"
	"context"
	"errors"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/limiter"
)

// encodeCases are decisions covering every field of the response messages:
// zero and non-zero scalars, negative numbers (ten-byte varints), durations
// of whole seconds, of nanoseconds only and negative ones, fallbacks with
// and without their strings, and keys long enough for two-byte lengths.
func encodeCases() map[string][]limiter.Decision {
	long := strings.Repeat("k", 300)
	full := limiter.Decision{
		Allowed: true, TooCostly: true, Matched: true,
		RetryAfter: 1500 * time.Millisecond, Remaining: 7, ResetAfter: 3 * time.Second,
		Limits: []limiter.LimitDecision{
			{Name: "per-user", Key: "weir:{acme}:per-user:acme:u1", Allowed: true, Remaining: 9, RetryAfter: time.Nanosecond, ResetAfter: time.Second, Burst: 10, Window: 10 * time.Second},
			{Name: "per-tenant", Key: long, Shadow: true, TooCostly: true, Remaining: -3, RetryAfter: -2 * time.Second, ResetAfter: -time.Nanosecond, Burst: math.MaxInt64, Window: math.MaxInt64},
		},
		Fallback:      &limiter.Fallback{Mode: "local", Reason: "owner_unreachable"},
		FromLease:     true,
		PolicyVersion: "v1-é",
	}
	conc := limiter.Decision{Allowed: true, Matched: true, Remaining: 1, ResetAfter: 30 * time.Second, PolicyVersion: "v7",
		Permit: []byte{1, 1, 0, 0xff}, Reservation: []byte("r"), Limits: []limiter.LimitDecision{
			{Name: "jobs", Key: "weir:{acme}:jobs:acme", Allowed: true, Remaining: 1, ResetAfter: 30 * time.Second, Burst: 2, Window: 30 * time.Second, InFlight: 1, Kind: limiter.KindConcurrency},
			{Name: "tokens", Key: "weir:{acme}:tokens:acme", Allowed: true, Remaining: 49, Burst: 50, Window: time.Second / 2, InFlight: -1, Kind: limiter.KindRate},
		}}
	denied := limiter.Decision{Matched: true, RetryAfter: 250 * time.Millisecond, ResetAfter: time.Minute, PolicyVersion: "v7",
		Limits: []limiter.LimitDecision{{Name: "n", Key: "k", Burst: 1, Window: time.Second}}}
	return map[string][]limiter.Decision{
		"empty batch":       nil,
		"zero decision":     {{}},
		"unmatched":         {{Allowed: true, PolicyVersion: "v1"}},
		"every field":       {full},
		"empty fallback":    {{Allowed: true, Fallback: &limiter.Fallback{}}},
		"negative":          {{Remaining: math.MinInt64, RetryAfter: math.MinInt64, ResetAfter: -1}},
		"mixed batch":       {full, denied, {}, full, {Allowed: true}},
		"many limits":       {{Matched: true, Limits: make([]limiter.LimitDecision, 9)}},
		"long response":     {{Limits: []limiter.LimitDecision{{Key: long}, {Key: long}}}},
		"huge durations":    {{RetryAfter: math.MaxInt64, ResetAfter: 999_999_999}},
		"one of each limit": {{Limits: []limiter.LimitDecision{{Allowed: true}, {Shadow: true}, {TooCostly: true}}}},
		"concurrency":       {conc, denied, conc},
		"long tokens":       {{Allowed: true, Permit: []byte(long), Reservation: bytes.Repeat([]byte{0xff}, 70000)}},
	}
}

// TestEncode_matchesProtoMarshal: the hand-written encoder writes the very
// bytes proto.Marshal writes for the messages ToProtoBatch builds, with and
// without a ring epoch, and they decode to the same messages.
func TestEncode_matchesProtoMarshal(t *testing.T) {
	for name, decs := range encodeCases() {
		for _, epoch := range []uint64{0, 1, math.MaxUint64} {
			want, err := proto.Marshal(&weirv1.DecideBatchResponse{Responses: ToProtoBatch(decs), RingEpoch: epoch})
			if err != nil {
				t.Fatalf("%s: proto.Marshal: %v", name, err)
			}
			got, err := appendBatchResponse([]byte("prefix"), decs, epoch)
			if err != nil {
				t.Fatalf("%s: appendBatchResponse: %v", name, err)
			}
			if !bytes.HasPrefix(got, []byte("prefix")) || !bytes.Equal(got[len("prefix"):], want) {
				t.Errorf("%s, epoch %d:\n got %x\nwant prefix + %x", name, epoch, got, want)
			}
		}
	}
}

// TestPreEncodedBatch_wire: the pre-encoded answer marshals to the same
// bytes as the built one, and reads back as it.
func TestPreEncodedBatch_wire(t *testing.T) {
	for name, decs := range encodeCases() {
		built := &weirv1.DecideBatchResponse{Responses: ToProtoBatch(decs), RingEpoch: 42}
		want, _ := proto.Marshal(built)
		pre, err := preEncodedBatch(decs, 42)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := proto.Marshal(pre)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: marshal = %x, %v; want %x", name, got, err, want)
		}
		back := new(weirv1.DecideBatchResponse)
		if err := proto.Unmarshal(got, back); err != nil || !proto.Equal(back, built) {
			t.Errorf("%s: read back %v, %v; want %v", name, back, err, built)
		}
	}
}

// TestEncode_invalidUTF8: a string proto.Marshal refuses is refused too,
// wherever it is.
func TestEncode_invalidUTF8(t *testing.T) {
	bad := "\xff"
	for name, d := range map[string]limiter.Decision{
		"policy version":  {PolicyVersion: bad},
		"limit name":      {Limits: []limiter.LimitDecision{{Name: bad}}},
		"limit key":       {Limits: []limiter.LimitDecision{{}, {Key: bad}}},
		"fallback mode":   {Fallback: &limiter.Fallback{Mode: bad}},
		"fallback reason": {Fallback: &limiter.Fallback{Reason: bad}},
	} {
		decs := []limiter.Decision{{Allowed: true}, d}
		if _, err := proto.Marshal(&weirv1.DecideBatchResponse{Responses: ToProtoBatch(decs)}); err == nil {
			t.Fatalf("%s: proto.Marshal accepted it; the test is wrong", name)
		}
		if _, err := appendBatchResponse(nil, decs, 0); !errors.Is(err, errInvalidUTF8) || !strings.Contains(err.Error(), "responses[1]") {
			t.Errorf("%s: err = %v, want errInvalidUTF8 naming responses[1]", name, err)
		}
	}
}

// FuzzEncode_BatchResponse compares the encoder with proto.Marshal on
// decisions built from arbitrary values.
func FuzzEncode_BatchResponse(f *testing.F) {
	f.Add(true, false, int64(7), int64(1500000000), int64(-1), "per-user", "weir:{a}:k", "local", "v1", uint8(2), uint64(0), []byte(nil), "rate")
	f.Add(false, true, int64(math.MinInt64), int64(math.MaxInt64), int64(999999999), "", "\xff", "", "", uint8(0), uint64(42), []byte{0}, "")
	f.Add(true, true, int64(1), int64(30e9), int64(0), "jobs", "weir:{a}:jobs:a", "", "v2", uint8(3), uint64(1), []byte{1, 1, 9}, "concurrency")
	f.Fuzz(func(t *testing.T, allowed, flag bool, remaining, d1, d2 int64, name, key, mode, version string, nlimits uint8, epoch uint64, token []byte, kind string) {
		d := limiter.Decision{
			Allowed: allowed, Matched: flag, TooCostly: !allowed && flag, FromLease: flag,
			Remaining: remaining, RetryAfter: time.Duration(d1), ResetAfter: time.Duration(d2),
			PolicyVersion: version, Permit: token,
		}
		if flag {
			d.Reservation = token
		}
		for i := range int(nlimits % 4) {
			d.Limits = append(d.Limits, limiter.LimitDecision{
				Name: name, Key: key, Allowed: allowed != (i%2 == 0), Shadow: flag, TooCostly: i == 2,
				Remaining: remaining - int64(i), RetryAfter: time.Duration(d2), ResetAfter: time.Duration(d1),
				Burst: d1, Window: time.Duration(remaining), InFlight: d2 - int64(i), Kind: kind,
			})
		}
		if mode != "" || !flag {
			d.Fallback = &limiter.Fallback{Mode: mode, Reason: name}
		}
		decs := []limiter.Decision{d, {}, d}
		want, wantErr := proto.Marshal(&weirv1.DecideBatchResponse{Responses: ToProtoBatch(decs), RingEpoch: epoch})
		got, err := appendBatchResponse(nil, decs, epoch)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("encoder err %v, proto.Marshal err %v", err, wantErr)
		}
		if err == nil && !bytes.Equal(got, want) {
			t.Fatalf("got  %x\nwant %x", got, want)
		}
	})
}

// wireBatch is m as a client reads it: the gRPC service's DecideBatch
// answer carries its fields pre-encoded (preEncodedBatch).
func wireBatch(t *testing.T, m *weirv1.DecideBatchResponse) *weirv1.DecideBatchResponse {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out := new(weirv1.DecideBatchResponse)
	if err := proto.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestGRPCService_DecideBatch_invalidUTF8(t *testing.T) {
	svc := NewGRPCService(brokenUTF8{}, nil)
	_, err := svc.DecideBatch(context.Background(), &weirv1.DecideBatchRequest{Requests: []*weirv1.DecideRequest{{}, {}}})
	wantCode(t, err, codes.Internal, "responses[0]")
}

// brokenUTF8 decides with a policy version that is not valid UTF-8, a bug
// no real Decider has: the answer cannot be encoded.
type brokenUTF8 struct{ Decider }

func (brokenUTF8) DecideBatch(_ context.Context, rs []limiter.Request) ([]limiter.Decision, error) {
	out := make([]limiter.Decision, len(rs))
	for i := range out {
		out[i].PolicyVersion = "\xff"
	}
	return out, nil
}

// TestGRPC_DecideBatch_preEncoded: through the production server options
// and through a plain server, the client reads exactly the messages
// ToProtoBatch builds from the same decisions, with the ring epoch.
func TestGRPC_DecideBatch_preEncoded(t *testing.T) {
	reqs := []*weirv1.DecideRequest{
		{Descriptors: map[string]string{"user": "u1"}},
		{Descriptors: map[string]string{"user": "blocked"}},
		{Descriptors: map[string]string{"user": "u2"}, Cost: new(int64(11))},
	}
	var decs []limiter.Decision
	for _, r := range reqs {
		d, err := fakeDecision(context.Background(), FromProto(r))
		if err != nil {
			t.Fatal(err)
		}
		decs = append(decs, d)
	}
	want := &weirv1.DecideBatchResponse{Responses: ToProtoBatch(decs), RingEpoch: 42}
	for name, opts := range map[string][]grpc.ServerOption{"production": DefaultGRPCConfig().ServerOptions(), "plain": nil} {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := grpc.NewServer(opts...)
		RegisterGRPC(s, &fakeDecider{}, nil, WithTopology(fakeTopology{}))
		go s.Serve(lis) //nolint:errcheck // Stop below ends it
		conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		got, err := weirv1.NewRateLimiterClient(conn).DecideBatch(withTimeout(t), &weirv1.DecideBatchRequest{Requests: reqs})
		conn.Close()
		s.Stop()
		if err != nil || !proto.Equal(got, want) {
			t.Errorf("%s: DecideBatch = %v, %v; want %v", name, got, err, want)
		}
	}
}
