package ring_test

import (
	"fmt"

	"github.com/weirhq/weir/ring"
)

func ExampleRing_Owner() {
	r, err := ring.New(ring.DefaultConfig(), "node-a", "node-b", "node-c")
	if err != nil {
		panic(err)
	}
	owner, ok := r.Owner("tenant-42")
	fmt.Println(ok, owner != "")

	// Membership changed: rebuild. Only about a third of groups move.
	_ = r.Set([]string{"node-a", "node-b"})
	fmt.Println(r.Members(), r.Version())
	// Output:
	// true true
	// [node-a node-b] 1
}
