package permit_test

import (
	"crypto/rand"
	"fmt"
	"time"

	"github.com/weirhq/weir/permit"
)

func ExampleSet_Acquire() {
	lim := permit.Limit{MaxInFlight: 1, TTL: int64(30 * time.Second)}
	var set permit.Set
	var id, other permit.ID
	_, _ = rand.Read(id[:])
	_, _ = rand.Read(other[:])

	now := int64(0)
	d, _ := set.Acquire(now, lim, id, 1)
	fmt.Println("first:", d.Allowed)
	d, _ = set.Acquire(now+int64(time.Second), lim, other, 1)
	fmt.Println("second:", d.Allowed, "retry after", time.Duration(d.RetryAfter))
	fmt.Println("released:", set.Release(now+int64(2*time.Second), id))
	d, _ = set.Acquire(now+int64(2*time.Second), lim, other, 1)
	fmt.Println("second again:", d.Allowed)
	// Output:
	// first: true
	// second: false retry after 29s
	// released: true
	// second again: true
}
