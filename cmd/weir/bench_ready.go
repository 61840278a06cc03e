package main

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
)

// readyWait bounds how long "weir bench" waits for its connections to be
// ready before the warm-up starts.
const readyWait = 5 * time.Second

// waitReady starts every connection of conns and waits until all are ready,
// so that connection setup (TCP, TLS, HTTP/2 settings) is not part of the
// first measured RPCs. It gives up, with an error naming the state, when a
// connection's first attempt fails (TRANSIENT_FAILURE: nothing to wait
// for) or once limit has passed or ctx ends; the caller may then run
// anyway and report the failed RPCs.
func waitReady(ctx context.Context, conns []*grpc.ClientConn, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for _, c := range conns {
		c.Connect()
	}
	for i, c := range conns {
		for {
			s := c.GetState()
			if s == connectivity.Ready {
				break
			}
			if s == connectivity.TransientFailure || s == connectivity.Shutdown {
				return fmt.Errorf("connection %d to %s is %v", i, c.Target(), s)
			}
			if !c.WaitForStateChange(ctx, s) {
				return fmt.Errorf("connection %d to %s not ready within %v (still %v)", i, c.Target(), limit, s)
			}
		}
	}
	return nil
}
