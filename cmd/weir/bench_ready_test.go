package main

import (
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/weirhq/weir/server/servertest"
)

func dialN(t *testing.T, addr string, n int) []*grpc.ClientConn {
	t.Helper()
	conns := make([]*grpc.ClientConn, n)
	for i := range conns {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns[i] = c
	}
	return conns
}

func TestWaitReady_serving(t *testing.T) {
	conns := dialN(t, servertest.Serve(t, &fakeNode{}), 3)
	if err := waitReady(t.Context(), conns, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for i, c := range conns {
		if s := c.GetState(); s != connectivity.Ready {
			t.Fatalf("connection %d is %v after waitReady", i, s)
		}
	}
}

func TestWaitReady_refused(t *testing.T) {
	start := time.Now()
	err := waitReady(t.Context(), dialN(t, "127.0.0.1:1", 1), 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "TRANSIENT_FAILURE") {
		t.Fatalf("waitReady = %v, want TRANSIENT_FAILURE", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("waited %v for a refused connection", waited)
	}
}

// A server that accepts TCP and never speaks HTTP/2 keeps the connection
// CONNECTING: waitReady gives up at its limit.
func TestWaitReady_boundedByItsLimit(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		lis.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	err = waitReady(t.Context(), dialN(t, lis.Addr().String(), 1), 200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "not ready within 200ms") {
		t.Fatalf("waitReady = %v, want not ready within 200ms", err)
	}
}
