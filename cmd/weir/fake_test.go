package main

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeNode is an in-process weir.v1.RateLimiter for the CLI tests. It
// decides on the "user" descriptor: key-N is allowed for even N, denied for
// odd N, and key-1 fails with UNAVAILABLE (a whole batch fails if any of its
// requests does). It counts RPCs and requests and remembers the keys seen.
type fakeNode struct {
	weirv1.UnimplementedRateLimiterServer

	delay time.Duration // slows every RPC down, to overload the open loop
	short bool          // answers a batch with one response too few
	onRPC func(n int)   // called with the running RPC count, if set

	mu    sync.Mutex
	rpcs  int
	items int
	keys  map[string]bool
}

func (f *fakeNode) Decide(_ context.Context, req *weirv1.DecideRequest) (*weirv1.DecideResponse, error) {
	resps, err := f.decide([]*weirv1.DecideRequest{req})
	if err != nil {
		return nil, err
	}
	return resps[0], nil
}

func (f *fakeNode) DecideBatch(_ context.Context, req *weirv1.DecideBatchRequest) (*weirv1.DecideBatchResponse, error) {
	resps, err := f.decide(req.GetRequests())
	if err != nil {
		return nil, err
	}
	if f.short {
		resps = resps[1:]
	}
	return &weirv1.DecideBatchResponse{Responses: resps}, nil
}

func (f *fakeNode) decide(reqs []*weirv1.DecideRequest) ([]*weirv1.DecideResponse, error) {
	f.mu.Lock()
	f.rpcs++
	f.items += len(reqs)
	n := f.rpcs
	if f.keys == nil {
		f.keys = map[string]bool{}
	}
	for _, r := range reqs {
		f.keys[r.GetDescriptors()["user"]] = true
	}
	f.mu.Unlock()
	if f.onRPC != nil {
		f.onRPC(n)
	}
	if f.delay > 0 {
		time.Sleep(f.delay) // a slow server, not a test waiting
	}
	out := make([]*weirv1.DecideResponse, len(reqs))
	for i, r := range reqs {
		idx, _ := strconv.Atoi(strings.TrimPrefix(r.GetDescriptors()["user"], "key-"))
		if idx == 1 {
			return nil, status.Error(codes.Unavailable, "key-1 is unlucky")
		}
		out[i] = fakeResponse(idx%2 == 0)
	}
	return out, nil
}

func (f *fakeNode) stats() (rpcs, items int, keys map[string]bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rpcs, f.items, f.keys
}

func fakeResponse(allowed bool) *weirv1.DecideResponse {
	r := &weirv1.DecideResponse{
		Allowed:       allowed,
		Matched:       true,
		Remaining:     4,
		ResetAfter:    durationpb.New(600 * time.Millisecond),
		PolicyVersion: "v7",
		Limits: []*weirv1.LimitStatus{{
			Name: "per-user", Key: "weir:{acme}:per-user:acme:u7", Allowed: allowed,
			Remaining: 4, Burst: 10, Window: durationpb.New(time.Second),
			ResetAfter: durationpb.New(600 * time.Millisecond),
		}},
	}
	if !allowed {
		r.Remaining, r.Limits[0].Remaining = 0, 0
		r.RetryAfter = durationpb.New(250 * time.Millisecond)
		r.Limits[0].RetryAfter = r.RetryAfter
	}
	return r
}
