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

// An LLM gateway: 1,000 tokens per second, a burst of 8,000. A request
// reserves its 4,000-token maximum, the answer used 1,500; settled half a
// second later, the 2,500 unused tokens come back.
func ExampleSettle() {
	lim, _ := gcra.PerPeriod(1000, time.Second, 8000)
	var tat, shift int64 // the key's state; both are stored
	now := int64(0)
	res, rsv, _ := gcra.Reserve(tat, shift, now, lim, 4000)
	tat = res.TAT
	fmt.Println("reserved:", res.Allowed, "remaining", res.Remaining)

	now += int64(500 * time.Millisecond)
	s, _ := gcra.Settle(tat, shift, now, lim, rsv, 1500)
	tat, shift = s.TAT, s.Shift
	r, _ := gcra.Decide(tat, now, lim, 1)
	fmt.Println("refunded:", s.Refunded, "kept", s.Kept, "remaining after one more", r.Remaining)
	// Output:
	// reserved: true remaining 4000
	// refunded: 2500 kept 0 remaining after one more 6999
}
