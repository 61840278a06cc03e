package client_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeServer is an in-process weir.v1.RateLimiter. It answers each request
// with its own "id" descriptor as the policy version and its cost as
// remaining, denies requests with a "deny" descriptor and rejects (whole
// batches of) requests with a "bad" descriptor as INVALID_ARGUMENT. It
// counts Decide RPCs and records the size of every DecideBatch RPC.
type fakeServer struct {
	weirv1.UnimplementedRateLimiterServer

	// block, when non-nil, holds every RPC until it is closed or the RPC's
	// context ends.
	block chan struct{}
	// entered receives (without blocking) once per RPC that started.
	entered chan struct{}

	mu      sync.Mutex
	decides int
	batches []int
}

func newFakeServer() *fakeServer {
	return &fakeServer{entered: make(chan struct{}, 1024)}
}

func (s *fakeServer) Decide(ctx context.Context, req *weirv1.DecideRequest) (*weirv1.DecideResponse, error) {
	s.mu.Lock()
	s.decides++
	s.mu.Unlock()
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	if err := check(req); err != nil {
		return nil, err
	}
	return answer(req), nil
}

func (s *fakeServer) DecideBatch(ctx context.Context, req *weirv1.DecideBatchRequest) (*weirv1.DecideBatchResponse, error) {
	s.mu.Lock()
	s.batches = append(s.batches, len(req.GetRequests()))
	s.mu.Unlock()
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	out := &weirv1.DecideBatchResponse{}
	for _, r := range req.GetRequests() {
		if err := check(r); err != nil {
			return nil, err
		}
		out.Responses = append(out.Responses, answer(r))
	}
	return out, nil
}

func (s *fakeServer) wait(ctx context.Context) error {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	if s.block == nil {
		return nil
	}
	select {
	case <-s.block:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

// counts returns the number of Decide RPCs and the DecideBatch sizes.
func (s *fakeServer) counts() (int, []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.decides, slices.Clone(s.batches)
}

func check(req *weirv1.DecideRequest) error {
	if req.GetDescriptors()["bad"] != "" {
		return status.Error(codes.InvalidArgument, "bad descriptor")
	}
	return nil
}

func answer(req *weirv1.DecideRequest) *weirv1.DecideResponse {
	return &weirv1.DecideResponse{
		Allowed:       req.GetDescriptors()["deny"] == "",
		Remaining:     req.GetCost(),
		Matched:       true,
		PolicyVersion: req.GetDescriptors()["id"],
	}
}
