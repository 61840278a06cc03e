package breaker_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weirhq/weir/breaker"
)

func Example() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	set, err := breaker.NewSet(breaker.DefaultConfig(), clock, nil, nil)
	if err != nil {
		panic(err)
	}
	dead := func(ctx context.Context) error { return context.DeadlineExceeded }

	for i := range 6 {
		b := set.Get("10.0.0.7:7946")
		done, err := b.Allow()
		if errors.Is(err, breaker.ErrOpen) {
			fmt.Println(i, "rejected without calling")
			continue
		}
		ctx := context.Background()
		err = dead(ctx)
		if ctx.Err() != nil {
			err = nil // our caller gave up: not the peer's fault
		}
		done(err)
		fmt.Println(i, "called:", err, "->", b.State())
	}
	// Output:
	// 0 called: context deadline exceeded -> closed
	// 1 called: context deadline exceeded -> closed
	// 2 called: context deadline exceeded -> closed
	// 3 called: context deadline exceeded -> closed
	// 4 called: context deadline exceeded -> open
	// 5 rejected without calling
}
