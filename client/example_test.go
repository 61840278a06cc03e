package client_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	"google.golang.org/grpc"

	weirv1 "github.com/weirhq/weir/api/weir/v1"
	"github.com/weirhq/weir/client"
	"github.com/weirhq/weir/clock"
)

func ExampleClient_Decide() {
	cfg := client.DefaultConfig()
	cfg.Target = "127.0.0.1:8081"
	cfg.BatchWindow = 200 * time.Microsecond // coalesce concurrent calls
	c, err := client.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	resp, err := c.Decide(context.Background(), map[string]string{"tenant": "acme", "user": "u7"}, 1)
	switch {
	case err != nil:
		fmt.Println("no answer, failing open:", err)
	case !resp.GetAllowed():
		fmt.Println("denied, retry after", resp.GetRetryAfter().AsDuration())
	default:
		fmt.Println("allowed,", resp.GetRemaining(), "remaining")
	}
}

// serveFake serves srv on a free loopback port for an example; stop ends
// it. (Tests use servertest.Serve, which needs a testing.TB.)
func serveFake(srv weirv1.RateLimiterServer) (addr string, stop func()) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	s := grpc.NewServer()
	weirv1.RegisterRateLimiterServer(s, srv)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Serve(lis)
	}()
	return lis.Addr().String(), func() { s.Stop(); <-done }
}

func ExampleClient_Acquire() {
	// A fake owner of one concurrency limit: 1 in flight, ttl 30s.
	addr, stop := serveFake(newPermitServer(clock.Real(), 1, 30*time.Second, 100))
	defer stop()

	cfg := client.DefaultConfig()
	cfg.Target = addr
	cfg.OnPermitError = func(d map[string]string, err error) { log.Printf("permit of %v: %v", d, err) }
	c, err := client.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	job := map[string]string{"tenant": "acme", "op": "export"}
	release, resp, err := c.Acquire(ctx, job)
	switch {
	case err != nil:
		fmt.Println("no answer: apply your failure policy:", err)
		return
	case !resp.GetAllowed():
		fmt.Println("busy, retry after", resp.GetRetryAfter().AsDuration())
		return
	}
	fmt.Println("admitted; renewed every third of its ttl while the export runs")

	// While the permit is held, the limit is full.
	_, busy, _ := c.Acquire(ctx, job)
	fmt.Println("second export admitted:", busy.GetAllowed(), "in flight:", busy.GetLimits()[0].GetInFlight())

	release() // when the work ends; calling it again does nothing
	again, next, _ := c.Acquire(ctx, job)
	defer again()
	fmt.Println("after release admitted:", next.GetAllowed())
	// Output:
	// admitted; renewed every third of its ttl while the export runs
	// second export admitted: false in flight: 1
	// after release admitted: true
}

func ExampleClient_Reserve() {
	// A fake owner of one rate limit with 100 units left.
	addr, stop := serveFake(newPermitServer(clock.Real(), 1, 30*time.Second, 100))
	defer stop()

	cfg := client.DefaultConfig()
	cfg.Target = addr
	c, err := client.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	// An LLM call that may use up to 80 tokens: charge 80 now...
	settle, resp, err := c.Reserve(ctx, map[string]string{"tenant": "acme"}, 80)
	if err != nil || !resp.GetAllowed() {
		fmt.Println("not now:", err, resp.GetRetryAfter().AsDuration())
		return
	}
	fmt.Println("reserved 80, remaining", resp.GetRemaining())
	// ...and settle what it used once known.
	s, err := settle(ctx, 30)
	if err != nil {
		fmt.Println("settle failed; the reservation stays charged:", err)
		return
	}
	fmt.Printf("settled %v: refunded %d, extra %d\n", s.Settled, s.Refunded, s.Extra)
	// Output:
	// reserved 80, remaining 20
	// settled true: refunded 50, extra 0
}
