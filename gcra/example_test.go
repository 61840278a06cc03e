package gcra_test

import (
	"fmt"
	"time"

	"github.com/weirhq/weir/gcra"
)

// The seed's hand trace: 5 per second with a burst of 3.
func ExampleDecide() {
	lim, _ := gcra.PerPeriod(5, time.Second, 3)
	var tat int64
	for _, at := range []time.Duration{0, 0, 0, 0, 250 * time.Millisecond, 250 * time.Millisecond} {
		r, _ := gcra.Decide(tat, int64(at), lim, 1) // nanoseconds
		tat = r.TAT
		fmt.Printf("t=%3dms allowed=%-5v remaining=%d retry_after=%s\n",
			at.Milliseconds(), r.Allowed, r.Remaining, time.Duration(r.RetryAfter))
	}
	// Output:
	// t=  0ms allowed=true  remaining=2 retry_after=0s
	// t=  0ms allowed=true  remaining=1 retry_after=0s
	// t=  0ms allowed=true  remaining=0 retry_after=0s
	// t=  0ms allowed=false remaining=0 retry_after=200ms
	// t=250ms allowed=true  remaining=0 retry_after=0s
	// t=250ms allowed=false remaining=0 retry_after=150ms
}
