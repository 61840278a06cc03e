package regionlink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/clock/clocktest"
	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/region"
)

// newClock returns the manual clock the tests move by hand.
func newClock() *clocktest.Manual { return clocktest.NewManual(time.Unix(1_700_000_000, 0)) }

// net is an in-memory network of Links by address, which can cut
// addresses off. Safe for concurrent use.
type net struct {
	mu    sync.Mutex
	nodes map[string]*Link
	down  map[string]bool
	sent  atomic.Int64
	// reports, if not nil, receives every report sent, before delivery.
	reports chan region.Report
}

func newNet() *net { return &net{nodes: map[string]*Link{}, down: map[string]bool{}} }

func (n *net) Send(ctx context.Context, addr string, r region.Report, forwarded bool) (region.Reply, error) {
	n.mu.Lock()
	to, down := n.nodes[addr], n.down[addr]
	n.mu.Unlock()
	n.sent.Add(1)
	if n.reports != nil {
		n.reports <- r
	}
	if to == nil || down {
		return region.Reply{}, fmt.Errorf("%s unreachable", addr)
	}
	return to.Handle(ctx, r, forwarded)
}

func (n *net) cut(addr string, down bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down[addr] = down
}

// owners maps groups to the address of their owner; self is the asking
// node's address.
type owners struct {
	self  string
	owner func(group string) string
}

func (o owners) RegionOwner(group string) (string, bool) {
	a := o.owner(group)
	return a, a == o.self
}

// classify: keys of limit "glob" are global, of any other limit not. Keys
// look like weir:{group}:limit:group.
func classify(key string) (string, bool) {
	parts := strings.Split(key, ":")
	if len(parts) < 3 {
		return "", false
	}
	return parts[2], parts[2] == "glob"
}

// limitName is classify's name.
func limitName(key string) string {
	name, _ := classify(key)
	return name
}

// defsOf is the limits' identities of keys as classify sees them, as a
// policy's Defs would carry them.
func defsOf(keys ...string) []*decide.Def {
	out := make([]*decide.Def, len(keys))
	for i, k := range keys {
		name, global := classify(k)
		out[i] = &decide.Def{Name: name, Global: global}
	}
	return out
}

func group(key string) (string, bool) {
	_, rest, ok := strings.Cut(key, "{")
	if !ok {
		return "", false
	}
	g, _, ok := strings.Cut(rest, "}")
	return g, ok
}

func key(limit, group string) string { return "weir:{" + group + "}:" + limit + ":" + group }

// testShares: eu and us, 10% floor, damping 1, reports every 100ms, 1s
// grants, no grace (one fake clock).
func testShares() region.Config {
	c := region.DefaultConfig("eu", "us")
	c.Floor, c.Damping, c.Grace = region.Whole/10, 1, 0
	c.Interval, c.TTL = 100*time.Millisecond, time.Second
	return c
}

// newLink returns the Link of node at addr in regionName on net n, with
// owner giving the address of each group's owner in its region.
func newLink(t *testing.T, n *net, clk *clocktest.Manual, regionName, addr string, owner func(string) string) *Link {
	t.Helper()
	return newLinkReg(t, n, clk, regionName, addr, owner, prometheus.NewRegistry())
}

func newLinkReg(t *testing.T, n *net, clk *clocktest.Manual, regionName, addr string, owner func(string) string, reg prometheus.Registerer) *Link {
	t.Helper()
	peers := map[string]string{"eu": "eu-1", "us": "us-1"}
	delete(peers, regionName)
	cfg := DefaultConfig(regionName, addr, peers)
	cfg.Shares = testShares()
	cfg.CallTimeout = cfg.Shares.Interval
	l, err := New(cfg, Deps{Owners: owners{self: addr, owner: owner}, Sender: n, LimitName: limitName, Group: group,
		Clock: clk, FirstSeq: 1}, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	n.nodes[addr] = l
	n.mu.Unlock()
	return l
}

// keyHomedIn returns a global key whose home is regionName.
func keyHomedIn(t *testing.T, regionName string, skip int) string {
	t.Helper()
	for i := range 10_000 {
		k := key("glob", fmt.Sprintf("g%d", i))
		if h, _ := region.HomeOf(k, []string{"eu", "us"}); h == regionName {
			if skip == 0 {
				return k
			}
			skip--
		}
	}
	t.Fatal("no key homed in " + regionName)
	return ""
}

var errNoTAT = errors.New("no tat")
