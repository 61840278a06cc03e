package writebehind_test

import (
	"context"
	"fmt"

	"github.com/weirhq/weir/redisbackend"
	"github.com/weirhq/weir/writebehind"
)

// printSink prints what would be written to Redis.
type printSink struct{}

func (printSink) StoreTATs(_ context.Context, tats []redisbackend.TAT) error {
	for _, t := range tats {
		fmt.Printf("SET %s %d (now %d)\n", t.Key, t.TAT, t.Now)
	}
	return nil
}

func ExampleWriter() {
	now := func() int64 { return 1_767_225_600_000_000_000 } // ns; in production: a redisclock.Clock's Now
	w, err := writebehind.New(writebehind.DefaultConfig(), printSink{}, now, nil, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	// go w.Run(ctx) would flush every 5ms; here we flush by hand.
	w.Mark("rl:{t42}:user:7", 1_767_225_600_100_000_000)
	w.Mark("rl:{t42}:user:7", 1_767_225_600_200_000_000) // coalesced: only the largest is written
	fmt.Println("pending:", w.Pending())
	if err := w.Flush(context.Background()); err != nil {
		fmt.Println(err)
	}
	fmt.Println("pending:", w.Pending())
	// Output:
	// pending: 1
	// SET rl:{t42}:user:7 1767225600200000000 (now 1767225600000000000)
	// pending: 0
}
