package region_test

import (
	"fmt"
	"time"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/region"
)

// Two regions share a global limit of 1,000/s, burst 100. Every process
// runs a Member; the key's home region also answers reports with its Home.
func Example() {
	cfg := region.DefaultConfig("eu", "us")
	global := gcra.Limit{Interval: int64(time.Millisecond), Burst: 100}
	key := "rl:{acme}:global"
	home, _ := region.HomeOf(key, cfg.Regions)

	ledger, _ := region.NewHome(cfg, home, 0)
	eu, _ := region.NewMember(cfg, "eu", "eu-node-1#1", 0)
	us, _ := region.NewMember(cfg, "us", "us-node-1#1", 0)

	now := int64(5 * time.Second) // past the home's start-up quiet period
	for range 12 {                // shares move half the way to their targets each round
		demand := map[*region.Member]float64{eu: 0.9, us: 0.1} // of the global rate
		for _, m := range []*region.Member{eu, us} {
			reps, _ := m.Reports(now, map[string]float64{key: demand[m]})
			for _, r := range reps { // over the wire to r.Home
				reply, _ := ledger.Handle(now, r)
				m.Apply(now, reply)
			}
		}
		now += cfg.Interval.Nanoseconds() // times are nanoseconds
	}
	lim, _ := cfg.Limit(eu.Share(key, now), global) // the unit rule: Σ bursts ≤ 100
	fmt.Printf("eu %d, us %d, reserved %d of %d\n", eu.Share(key, now), us.Share(key, now), ledger.Reserved(key, now), region.Whole)
	fmt.Printf("eu enforces one unit every %s, burst %d\n", time.Duration(lim.Interval), lim.Burst)
	// Output:
	// eu 900000, us 100000, reserved 1000000 of 1000000
	// eu enforces one unit every 1.111112ms, burst 90
}
