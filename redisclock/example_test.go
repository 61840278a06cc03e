package redisclock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/weirhq/weir/clock"
	"github.com/weirhq/weir/clock/clocktest"
	"github.com/weirhq/weir/redisclock"
)

// constSource is a Redis whose clock is 250ms ahead of the node's.
type constSource struct{ local clock.Clock }

func (s constSource) Time(context.Context) (int64, error) {
	return s.local.Now().Add(250 * time.Millisecond).UnixNano(), nil
}

func ExampleClock() {
	local := clocktest.NewManual(time.Unix(0, 1_767_225_600_000_000_000)) // a stopped clock
	clk, err := redisclock.New(redisclock.DefaultConfig(), constSource{local}, local, nil, nil)
	if err != nil {
		fmt.Println("new:", err)
		return
	}
	if err := clk.Sync(context.Background()); err != nil {
		fmt.Println("sync:", err)
		return
	}
	fmt.Println(clk.Synced(), clk.Offset(), clk.Now())
	// Output: true 250ms 1767225600250000000
}
