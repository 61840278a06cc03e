package lease_test

import (
	"fmt"
	"time"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/lease"
)

// A peer leases units of a hot key from its owner, spends them locally,
// and returns what it did not spend at its next refresh.
func Example() {
	lim := gcra.Limit{Interval: 1000, Burst: 100} // 1000/s, burst 100
	terms := lease.Terms{Max: 50, TTL: 250 * time.Millisecond}
	ref := lease.Ref{Group: "t1", Key: "rl:{t1}:all", Owner: "node-a", Limit: lim, Terms: terms, Label: "tenant"}

	grantor, _ := lease.NewGrantor(lease.GrantorConfig{Name: "node-a#1"})
	hcfg := lease.DefaultHolderConfig()
	hcfg.Name = "node-b#1"
	holder, _ := lease.NewHolder(hcfg)

	var tat, now int64 // the owner's TAT for the key; one time base here
	for range 100 {    // requests before any lease: forwarded
		holder.Spend([]lease.Ref{ref}, 1, now)
	}
	serve := func(r lease.Refresh) lease.Reply {
		rep := lease.Reply{Owner: r.Owner, Seq: r.Seq}
		for _, it := range r.Items {
			a, _ := grantor.Grant(tat, now, it)
			tat = a.TAT // write-through before replying
			rep.Answers = append(rep.Answers, a)
		}
		return rep
	}
	for _, owner := range holder.Due(now) {
		r, _ := holder.Refresh(owner, now)
		holder.Apply(serve(r), now)
	}
	fmt.Println("held:", holder.Units(ref.Key, now))

	now += 10_000
	v, _ := holder.Spend([]lease.Ref{ref}, 3, now)
	fmt.Println("spend 3:", v.Outcome == lease.Spent, "left:", holder.Units(ref.Key, now))

	r, _ := holder.Refresh("node-a", now) // returns the 15 unspent units
	rep := serve(r)
	holder.Apply(rep, now)
	fmt.Println("credited:", rep.Answers[0].Credited, "held:", holder.Units(ref.Key, now))
	// Output:
	// held: 18
	// spend 3: true left: 15
	// credited: 15 held: 18
}

// CheckLeasable explains why a small limit is not leased.
func ExampleCheckLeasable() {
	lim := gcra.Limit{Interval: 20_000, Burst: 20} // 50/s per user, burst 20
	err := lease.CheckLeasable(lim, lease.Terms{Max: 10, TTL: time.Second}, 40)
	fmt.Println(err)
	// Output:
	// lease: limit is not leasable: burst 20 is below 4 × 40 nodes = 160
}
