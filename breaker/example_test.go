package breaker_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/weirhq/weir/breaker"
)

func Example() {
	set, err := breaker.NewSet(breaker.DefaultConfig(), nil, nil)
	if err != nil {
		panic(err)
	}
	refused := errors.New("connection refused")
	dead := func(ctx context.Context) error { return refused }

	for i := range 6 {
		b := set.Get("10.0.0.7:7946")
		done, err := b.Allow()
		if errors.Is(err, breaker.ErrOpen) {
			fmt.Println(i, "rejected without calling")
			continue
		}
		ctx := context.Background()
		err = dead(ctx)
		if err != nil && ctx.Err() != nil {
			err = breaker.ErrExcused // our caller gave up: not the peer's fault
		}
		done(err)
		fmt.Println(i, "called:", err, "->", b.State())
	}
	// Output:
	// 0 called: connection refused -> closed
	// 1 called: connection refused -> closed
	// 2 called: connection refused -> closed
	// 3 called: connection refused -> closed
	// 4 called: connection refused -> open
	// 5 rejected without calling
}
