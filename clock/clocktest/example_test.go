package clocktest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/clock/clocktest"
)

// poll calls f every interval on clk until ctx ends: the shape of the
// loops weir's packages run.
func poll(ctx context.Context, clk clock.Clock, interval time.Duration, f func(time.Time)) {
	t := clk.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C():
			f(now)
		}
	}
}

func ExampleManual() {
	clk := clocktest.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ticks := make(chan time.Time)
	done := make(chan struct{})
	go func() {
		defer close(done)
		poll(ctx, clk, time.Second, func(now time.Time) { ticks <- now })
	}()

	// No sleeping: wait until the loop has made its ticker, then move the
	// clock past its deadline.
	if err := clk.WaitForTimers(ctx, 1); err != nil {
		fmt.Println(err)
		return
	}
	clk.Advance(time.Second)
	fmt.Println((<-ticks).Format(time.TimeOnly))
	clk.Advance(time.Second)
	fmt.Println((<-ticks).Format(time.TimeOnly))
	cancel()
	<-done
	// Output:
	// 00:00:01
	// 00:00:02
}
