package servertest

import (
	"net"
	"testing"

	"google.golang.org/grpc"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
)

// Serve starts srv on 127.0.0.1 at a free port and returns the address.
// The server stops, and its goroutine ends, when the test ends.
func Serve(t testing.TB, srv weirv1.RateLimiterServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	weirv1.RegisterRateLimiterServer(s, srv)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(lis)
	}()
	t.Cleanup(func() {
		s.Stop()
		<-done
	})
	return lis.Addr().String()
}
