package main

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{4, 1}, 2.5}, {[]float64{9, 1, 5}, 5}, {[]float64{4, 1, 3, 2}, 2.5}} {
		in := append([]float64(nil), c.in...)
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", in, got, c.want)
		}
		for i := range in {
			if in[i] != c.in[i] {
				t.Errorf("median reordered its input: %v", c.in)
			}
		}
	}
}

func TestSpliceSection(t *testing.T) {
	doc := "# B\n\nintro\n" + beginMarker + "\nold table\n" + endMarker + "\nafter\n"
	got, err := spliceSection([]byte(doc), "| new |\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "# B\n\nintro\n" + beginMarker + "\n| new |\n" + endMarker + "\nafter\n"
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	// Idempotent: splicing the same table again changes nothing.
	again, err := spliceSection(got, "| new |\n")
	if err != nil || string(again) != want {
		t.Errorf("second splice: %q, %v", again, err)
	}
}

func TestSpliceSection_noMarkers(t *testing.T) {
	for _, doc := range []string{"plain", endMarker + "\n" + beginMarker, beginMarker + " only"} {
		if _, err := spliceSection([]byte(doc), "x"); !errors.Is(err, errNoMarkers) {
			t.Errorf("%q: err %v, want errNoMarkers", doc, err)
		}
	}
}

func TestRunsTable(t *testing.T) {
	sys := []system{{name: weirThree}, {name: "s2"}, {name: ratelimitName}}
	var rs runs
	mk := func(decisions, admitted int64, cpu time.Duration, cmds int64) result {
		r := result{limit: benchLimit, decisions: decisions, admitted: admitted, window: time.Second,
			latencies: []time.Duration{time.Millisecond, 2 * time.Millisecond},
			metered:   true, use: usage{cpu: cpu, cmds: map[string]int64{"mget": cmds}}}
		return r
	}
	rs.add(weirThree, spread.name, mk(1000, 900, 100*time.Millisecond, 10))
	rs.add(weirThree, spread.name, mk(3000, 900, 150*time.Millisecond, 30))
	rs.add(weirThree, hotKey.name, mk(500, 100, 50*time.Millisecond, 0))
	rs.add(weirThree, hotKey.name, mk(700, 120, 70*time.Millisecond, 0))
	rs.add(ratelimitName, spread.name, mk(500, 500, 100*time.Millisecond, 1000))
	rs.add(ratelimitName, spread.name, mk(1000, 1000, 100*time.Millisecond, 2000))
	paced := mk(2000, 2000, 200*time.Millisecond, 20)
	paced.late = 3
	rs.add(weirThree, pacedLoad.name, paced)
	rs.add(weirThree, pacedLoad.name, paced)
	lease := func(decisions int64, node string) result {
		r := mk(decisions, 1100, time.Second, 0)
		r.limit, r.node = leasedLimit, node
		return r
	}
	rs.add(weirThree, leasedRow(0), lease(10000, "n1"))
	rs.add(weirThree, leasedRow(0), lease(20000, "n1"))
	rs.add(weirThree, leasedRow(1), lease(5000, "n0"))
	rs.add(weirThree, leasedRow(1), lease(20000, "n0"))
	rs.add(weirThree, leasedRow(2), lease(9000, "n2"))
	rs.add(weirThree, leasedRow(2), lease(10000, "n2"))
	cfg := config{runs: 2, conns: 1, load: loadConfig{workers: 4, duration: time.Second}, pace: pacing{rate: 2000, inFlight: 256}}
	table := rs.table(sys, cfg, time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC))

	for _, want := range []string{
		// 100ms over 1000 decisions is 100µs, 150ms over 3000 50µs.
		"| " + weirThree + " | " + spread.name + " | 2000 (1000, 3000) | 1ms | 2ms | 75 µs (100, 50) | 0.010 (0.010, 0.010) | — | — | 0 |",
		"| " + weirThree + " | " + hotKey.name + " | 600 (500, 700) | 1ms | 2ms | 100 µs (100, 100) | 0.000 (0.000, 0.000) | 110 / 110 (100, 120) | 0 (0, 0) | 0 |",
		"| " + weirThree + " | " + pacedLoad.name + " | 2000 (2000, 2000) | 1ms | 2ms | 100 µs (100, 100) | 0.010 (0.010, 0.010) | 3 | 0 |",
		"2000 decisions/s in total",
		"| " + weirThree + " | the owner | n1 | 15000 (10000, 20000) | 1 |",
		"| " + weirThree + " | non-owner 1 | n0 | 12500 (5000, 20000) | 0.75 (0.50, 1.00) |",
		"| " + weirThree + " | non-owner 2 | n2 | 9500 (9000, 10000) | 0.70 (0.90, 0.50) |",
		"bound 1100 |",
		"1100 / 1100 (1100, 1100)",
		// Throughput 2000/750 and CPU 75/150 (ratelimit: 200µs, 100µs).
		"| 3 nodes (plain client) ÷ envoyproxy/ratelimit, decisions/s, spread | ≥ 1.5 | 2.5 | 2, 3 | yes |",
		"| 3 nodes (plain client) ÷ envoyproxy/ratelimit, server CPU/decision, spread | ≤ 0.5 | 0.5 | 0.5, 0.5 | yes |",
		"| 3 nodes (plain client), Redis commands/decision, spread | ≤ 0.02 | 0.01 | 0.01, 0.01 | yes |",
		// The slowest non-owner each round: 0.5 then 0.5.
		"| leasable hot key: slowest non-owner ÷ owner, decisions/s | ≥ 0.85 | 0.5 | 0.5, 0.5 | no |",
		"2026-12-01 11:00 UTC",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	for _, absent := range []string{"| s2 |", "÷ 1 node", "| " + ratelimitName + " | " + pacedLoad.name} {
		if strings.Contains(table, absent) {
			t.Errorf("table has %q, for a system or workload that was not run:\n%s", absent, table)
		}
	}
}

func TestRunsTable_unmeteredAndNoRedis(t *testing.T) {
	var rs runs
	rs.add("s1", spread.name, result{limit: benchLimit, decisions: 10, window: time.Second, latencies: []time.Duration{time.Millisecond}})
	table := rs.table([]system{{name: "s1"}}, config{runs: 1, conns: 1}, time.Now())
	if !strings.Contains(table, "| s1 | "+spread.name+" | 10 (10) | 1ms | 1ms | — | — | — | — | 0 |") {
		t.Errorf("unmetered row not shown as —:\n%s", table)
	}
	for _, absent := range []string{"Paced", "Leasable", "Issue 24"} {
		if strings.Contains(table, absent) {
			t.Errorf("table has %q with no such run:\n%s", absent, table)
		}
	}
}

func TestSelectSystems(t *testing.T) {
	all := systems(false)
	if got := selectSystems(systems(false), ""); len(got) != len(all) {
		t.Errorf("no filter kept %d of %d", len(got), len(all))
	}
	got := selectSystems(systems(false), "gubernator,ratelimit")
	for _, s := range got {
		if !strings.Contains(s.name, "gubernator") && !strings.Contains(s.name, "ratelimit") {
			t.Errorf("kept %q", s.name)
		}
	}
	if len(got) != 4 {
		t.Errorf("kept %d systems, want the 3 gubernator and 1 ratelimit", len(got))
	}
	for _, name := range []string{weirOne, weirThree, weirRouted, ratelimitName} {
		if !slices.ContainsFunc(all, func(s system) bool { return s.name == name }) {
			t.Errorf("no system %q, which issue 24's targets compare", name)
		}
	}
}
