package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weirhq/weir/chaos/history"
)

// nodeMetrics is what the runner reads from one node's /metrics.
type nodeMetrics struct {
	// members is weir_cluster_members (0 when absent).
	members int
	// start is process_start_time_seconds: it tells a node's processes
	// apart, as a restarted process counts from zero again (0 when absent).
	start float64
	// leases are the lease counters per limit.
	leases map[string]history.LeaseCounts
}

// scrape reads a node's /metrics.
func scrape(n *Node) (nodeMetrics, error) {
	c := http.Client{Timeout: 500 * time.Millisecond}
	resp, err := c.Get(n.httpURL("/metrics"))
	if err != nil {
		return nodeMetrics{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nodeMetrics{}, fmt.Errorf("/metrics: %s", resp.Status)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics reads the series the runner needs from the Prometheus text
// format and ignores every other line.
func parseMetrics(r io.Reader) (nodeMetrics, error) {
	m := nodeMetrics{leases: map[string]history.LeaseCounts{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, value, ok := splitSample(line)
		if !ok {
			continue
		}
		switch name {
		case "weir_cluster_members":
			m.members = int(value)
		case "process_start_time_seconds":
			m.start = value
		case "weir_lease_units_total", "weir_lease_decisions_total":
			limit := labels["limit"]
			c := m.leases[limit]
			if field := leaseField(&c, name, labels); field != nil {
				*field = int64(value)
				m.leases[limit] = c
			}
		}
	}
	return m, sc.Err()
}

// leaseField is the counter of c that the series name{labels} holds, or nil
// for an event or outcome the runner does not know.
func leaseField(c *history.LeaseCounts, name string, labels map[string]string) *int64 {
	if name == "weir_lease_decisions_total" {
		switch labels["outcome"] {
		case "spent":
			return &c.SpentDecisions
		case "refused":
			return &c.RefusedDecisions
		case "forwarded":
			return &c.ForwardedDecisions
		}
		return nil
	}
	switch labels["event"] {
	case "granted":
		return &c.Granted
	case "credited":
		return &c.Credited
	case "expired":
		return &c.Expired
	case "received":
		return &c.Received
	case "spent":
		return &c.Spent
	case "returned":
		return &c.Returned
	case "stranded":
		return &c.Stranded
	case "lost":
		return &c.Lost
	}
	return nil
}

// splitSample splits one sample line, `name{a="x",b="y"} value`, into its
// parts. Label values holding commas, quotes or braces are not expected
// (limit names and the runner's label values have none).
func splitSample(line string) (name string, labels map[string]string, value float64, ok bool) {
	rest := line
	if i := strings.IndexByte(line, '{'); i >= 0 {
		j := strings.IndexByte(line, '}')
		if j < i {
			return "", nil, 0, false
		}
		name, rest = line[:i], line[j+1:]
		labels = map[string]string{}
		for _, kv := range strings.Split(line[i+1:j], ",") {
			k, v, found := strings.Cut(kv, "=")
			if !found {
				continue
			}
			labels[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"`)
		}
	} else {
		var found bool
		if name, rest, found = strings.Cut(line, " "); !found {
			return "", nil, 0, false
		}
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return "", nil, 0, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return "", nil, 0, false
	}
	return name, labels, v, true
}

// leaseTally sums the nodes' lease counters over every process each node
// ran: it keeps the latest reading of each (node, process start time), so
// a restarted node's counters add to its earlier process's last reading.
// Units a process counted after its last reading (at most one member poll
// before it was killed) are missed. Safe for concurrent use.
type leaseTally struct {
	mu   sync.Mutex
	last map[incarnation]nodeMetrics
}

type incarnation struct {
	node  string
	start float64
}

// note keeps m as node's latest reading of its current process.
func (t *leaseTally) note(node string, m nodeMetrics) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last == nil {
		t.last = map[incarnation]nodeMetrics{}
	}
	t.last[incarnation{node, m.start}] = m
}

// total is the sum of every process's latest counters, per limit.
func (t *leaseTally) total() map[string]history.LeaseCounts {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]history.LeaseCounts{}
	for _, m := range t.last {
		for limit, c := range m.leases {
			out[limit] = out[limit].Add(c)
		}
	}
	return out
}

// leaseSettle bounds how long recordLeases waits for the peers to give
// back or write off what they hold once the workload has stopped. A peer
// keeps renewing a key's lease while its demand estimate (an EWMA with a
// half-life of a second) asks for a unit per TTL: about a second after a
// key of a few units a second goes quiet, but log2(rate × TTL) seconds
// after a hot one (8 s for 1,000/s at 250ms). Units still held at the end
// are reported as such (LeaseCounts.Held), neither spent nor stranded.
const leaseSettle = 3 * time.Second

// recordLeases waits until no live node holds lease units (or leaseSettle
// passes), then records the lease counters of the run as a Leases event.
func (tb *testbed) recordLeases(ctx context.Context) {
	detail := "read from every node's /metrics at every member poll and once every live node held no lease units"
	err := waitUntil(ctx, leaseSettle, "the peers to hold no lease units", func() error {
		var errs []error
		for _, n := range tb.live() {
			m, err := scrape(n)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", n.Name, err))
				continue
			}
			tb.leases.note(n.Name, m)
			for limit, c := range m.leases {
				if h := c.Held(); h != 0 {
					errs = append(errs, fmt.Errorf("%s holds %d units of %q", n.Name, h, limit))
				}
			}
		}
		return errors.Join(errs...)
	})
	if err != nil {
		detail = fmt.Sprintf("read from every node's /metrics at every member poll and at the end; %v", err)
	}
	tb.events.Event(history.Event{Time: time.Now().UnixNano(), Kind: history.Leases, Detail: detail, Leases: tb.leases.total()})
	tb.events.Flush()
}
