package server

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
)

type fakeTopology struct {
	resp *weirv1.TopologyResponse // nil: cannot publish
}

func (f fakeTopology) Topology(context.Context) (*weirv1.TopologyResponse, bool) {
	return f.resp, f.resp != nil
}
func (f fakeTopology) Epoch() uint64 { return 42 }

func TestGRPCService_Topology(t *testing.T) {
	ctx := context.Background()
	want := &weirv1.TopologyResponse{RingEpoch: 42, Hash: "xxhash64"}
	svc := NewGRPCService(&fakeDecider{}, nil, WithTopology(fakeTopology{resp: want}))
	got, err := svc.Topology(ctx, &weirv1.TopologyRequest{})
	if err != nil || got != want {
		t.Fatalf("Topology = %v, %v; want the source's answer", got, err)
	}
	one, err := svc.Decide(ctx, &weirv1.DecideRequest{Descriptors: map[string]string{"user": "u"}})
	if err != nil || one.GetRingEpoch() != 42 {
		t.Errorf("Decide: epoch %d, %v; want 42", one.GetRingEpoch(), err)
	}
	batch, err := svc.DecideBatch(ctx, &weirv1.DecideBatchRequest{Requests: []*weirv1.DecideRequest{{}}})
	if err != nil || wireBatch(t, batch).GetRingEpoch() != 42 {
		t.Errorf("DecideBatch: epoch %d, %v; want 42", batch.GetRingEpoch(), err)
	}
}

func TestGRPCService_Topology_unpublished(t *testing.T) {
	ctx := context.Background()
	for name, svc := range map[string]weirv1.RateLimiterServer{
		"no source":      NewGRPCService(&fakeDecider{}, nil),
		"source refuses": NewGRPCService(&fakeDecider{}, nil, WithTopology(fakeTopology{})),
	} {
		if _, err := svc.Topology(ctx, &weirv1.TopologyRequest{}); status.Code(err) != codes.Unimplemented {
			t.Errorf("%s: err = %v, want UNIMPLEMENTED", name, err)
		}
	}
	one, err := NewGRPCService(&fakeDecider{}, nil).Decide(ctx, &weirv1.DecideRequest{})
	if err != nil || one.GetRingEpoch() != 0 {
		t.Errorf("Decide without a source: epoch %d, %v; want 0", one.GetRingEpoch(), err)
	}
}
