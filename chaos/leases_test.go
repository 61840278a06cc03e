package chaos

import (
	"strings"
	"testing"

	"github.com/weirhq/weir/chaos/history"
)

const sampleMetrics = `# HELP weir_cluster_members Members this node counts.
# TYPE weir_cluster_members gauge
weir_cluster_members 3
process_start_time_seconds 1.7648e+09
weir_lease_units_total{event="granted",limit="lease"} 40
weir_lease_units_total{event="credited",limit="lease"} 7
weir_lease_units_total{event="expired",limit="lease"} 3
weir_lease_units_total{event="received",limit="lease"} 12
weir_lease_units_total{event="spent",limit="lease"} 9
weir_lease_units_total{event="returned",limit="lease"} 1
weir_lease_units_total{event="stranded",limit="lease"} 2
weir_lease_units_total{event="lost",limit="lease"} 1
weir_lease_units_total{event="someday",limit="lease"} 99
weir_lease_decisions_total{limit="lease",outcome="spent"} 9
weir_lease_decisions_total{limit="lease",outcome="refused"} 30
weir_lease_decisions_total{limit="lease",outcome="forwarded"} 5
weir_lease_rpcs_total{result="ok"} 17
weir_lease_units_total{event="granted",limit="other"} 4
`

func TestParseMetrics_readsMembersStartAndLeaseCounters(t *testing.T) {
	m, err := parseMetrics(strings.NewReader(sampleMetrics))
	if err != nil {
		t.Fatal(err)
	}
	if m.members != 3 || m.start != 1.7648e9 {
		t.Errorf("members %d start %v, want 3 and 1.7648e9", m.members, m.start)
	}
	want := history.LeaseCounts{Granted: 40, Credited: 7, Expired: 3, Received: 12, Spent: 9, Returned: 1, Stranded: 2, Lost: 1,
		SpentDecisions: 9, RefusedDecisions: 30, ForwardedDecisions: 5}
	if got := m.leases["lease"]; got != want {
		t.Errorf("lease counters\n got %+v\nwant %+v", got, want)
	}
	if got := m.leases["other"]; got != (history.LeaseCounts{Granted: 4}) {
		t.Errorf("other = %+v", got)
	}
	if h := m.leases["lease"].Held(); h != 0 {
		t.Errorf("held = %d, want 12 - 9 - 1 - 2 = 0", h)
	}
}

func TestParseMetrics_skipsMalformedLines(t *testing.T) {
	m, err := parseMetrics(strings.NewReader("weir_cluster_members\nweir_lease_units_total{event=\"granted\",limit=\"l\"} x\n}{ 3\nweir_cluster_members 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m.members != 2 || len(m.leases) != 0 {
		t.Errorf("got members %d leases %v, want 2 and none", m.members, m.leases)
	}
}

// TestLeaseTally_sumsProcessesNotReadings: repeated readings of one
// process count once (the latest), and a node's restarted process (a new
// start time, counting from zero) adds to its earlier process's last
// reading.
func TestLeaseTally_sumsProcessesNotReadings(t *testing.T) {
	reading := func(start float64, granted, stranded int64) nodeMetrics {
		return nodeMetrics{start: start, leases: map[string]history.LeaseCounts{"l": {Granted: granted, Stranded: stranded}}}
	}
	var tally leaseTally
	tally.note("n1", reading(100, 5, 0))
	tally.note("n1", reading(100, 8, 1)) // the same process, later
	tally.note("n2", reading(100, 3, 2))
	tally.note("n1", reading(200, 2, 0)) // n1 restarted
	got := tally.total()["l"]
	if got.Granted != 8+3+2 || got.Stranded != 1+2 {
		t.Errorf("total = %+v, want granted 13 stranded 3", got)
	}
}
