package chaos

import (
	"context"
	"sync"
	"time"

	"github.com/weirhq/weir/chaos/history"
)

// memberPoll is how often watchMembers reads each node's member count.
const memberPoll = 200 * time.Millisecond

// watchMembers records a Members event whenever a node's count of cluster
// members changes (and its first reading), until the returned stop is
// called. The checker derives the default fallback share of each node
// from it. A node that does not answer keeps its last count. The same
// reading of /metrics feeds the lease tally.
func (tb *testbed) watchMembers(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		last := map[string]int{}
		t := time.NewTicker(memberPoll)
		defer t.Stop()
		for {
			for _, n := range tb.nodes {
				sm, err := scrape(n)
				if err != nil {
					continue
				}
				tb.leases.note(n.Name, sm)
				m := sm.members
				if m <= 0 || m == last[n.Name] {
					continue
				}
				last[n.Name] = m
				tb.events.Event(history.Event{Time: time.Now().UnixNano(), Kind: history.Members, Nodes: []string{n.Name}, Members: m})
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
		tb.events.Flush()
	}
}
