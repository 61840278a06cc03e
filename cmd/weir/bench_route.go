package main

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/client"
)

// routeWait bounds how long --route waits for the first topology.
const routeWait = 5 * time.Second

// routedStubs returns cfg.conns routing clients (client.Config.Route, no
// batching, the bench's TLS and timeout) as stubs, each with its own
// connection to every member, once each has read the topology; close them
// with the returned function.
func routedStubs(ctx context.Context, cfg benchConfig) ([]weirv1.RateLimiterClient, func(), error) {
	var clients []*client.Client
	closeAll := func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}
	stubs := make([]weirv1.RateLimiterClient, cfg.conns)
	for i := range stubs {
		ccfg := client.DefaultConfig()
		ccfg.Target, ccfg.Route, ccfg.Timeout, ccfg.TLS = cfg.addr, true, cfg.timeout, cfg.tls
		c, err := client.New(ccfg)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		clients = append(clients, c)
		stubs[i] = routedStub{c}
	}
	deadline := time.Now().Add(routeWait)
	for _, c := range clients {
		for c.RouteEpoch() == 0 {
			if time.Now().After(deadline) || ctx.Err() != nil {
				closeAll()
				return nil, nil, fmt.Errorf("--route: no topology from %s within %v (does the node publish one?)", cfg.addr, routeWait)
			}
			time.Sleep(10 * time.Millisecond) // polling the client's state, not waiting for an outcome
		}
	}
	return stubs, closeAll, nil
}

// routedStub serves the bench's RPCs through a routing client.
type routedStub struct{ c *client.Client }

var _ weirv1.RateLimiterClient = routedStub{}

func (s routedStub) Decide(ctx context.Context, in *weirv1.DecideRequest, _ ...grpc.CallOption) (*weirv1.DecideResponse, error) {
	return s.c.Decide(ctx, in.GetDescriptors(), in.GetCost())
}

func (s routedStub) DecideBatch(ctx context.Context, in *weirv1.DecideBatchRequest, _ ...grpc.CallOption) (*weirv1.DecideBatchResponse, error) {
	resps, err := s.c.DecideBatch(ctx, in.GetRequests())
	if err != nil {
		return nil, err
	}
	return &weirv1.DecideBatchResponse{Responses: resps}, nil
}

func (routedStub) Topology(context.Context, *weirv1.TopologyRequest, ...grpc.CallOption) (*weirv1.TopologyResponse, error) {
	return nil, status.Error(codes.Unimplemented, "bench: not used")
}

func (routedStub) Release(context.Context, *weirv1.ReleaseRequest, ...grpc.CallOption) (*weirv1.ReleaseResponse, error) {
	return nil, status.Error(codes.Unimplemented, "bench: not used")
}

func (routedStub) Renew(context.Context, *weirv1.RenewRequest, ...grpc.CallOption) (*weirv1.RenewResponse, error) {
	return nil, status.Error(codes.Unimplemented, "bench: not used")
}

func (routedStub) Settle(context.Context, *weirv1.SettleRequest, ...grpc.CallOption) (*weirv1.SettleResponse, error) {
	return nil, status.Error(codes.Unimplemented, "bench: not used")
}
