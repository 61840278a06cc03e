package main

import (
	"errors"
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
	sys := []system{{name: "s1"}, {name: "s2"}}
	var rs runs
	mk := func(decisions, admitted int64) result {
		return result{decisions: decisions, admitted: admitted, window: time.Second,
			latencies: []time.Duration{time.Millisecond, 2 * time.Millisecond}}
	}
	rs.add("s1", spread.name, mk(1000, 900))
	rs.add("s1", spread.name, mk(3000, 900))
	rs.add("s1", hotKey.name, mk(500, 100))
	rs.add("s1", hotKey.name, mk(700, 120))
	cfg := config{runs: 2, conns: 1, load: loadConfig{workers: 4, duration: time.Second}}
	table := rs.table(sys, cfg, time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC))

	for _, want := range []string{
		"| s1 | " + spread.name + " | 2000 (1000, 3000) | 1ms | 2ms | — | — | 0 |",
		"| s1 | " + hotKey.name + " | 600 (500, 700) | 1ms | 2ms | 110 / 110 (100, 120) | 0 (0, 0) | 0 |",
		"2026-12-01 11:00 UTC",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "| s2 |") {
		t.Errorf("table has a row for a system that was not run:\n%s", table)
	}
}

func TestSelectSystems(t *testing.T) {
	all := systems()
	if got := selectSystems(systems(), ""); len(got) != len(all) {
		t.Errorf("no filter kept %d of %d", len(got), len(all))
	}
	got := selectSystems(systems(), "gubernator,ratelimit")
	for _, s := range got {
		if !strings.Contains(s.name, "gubernator") && !strings.Contains(s.name, "ratelimit") {
			t.Errorf("kept %q", s.name)
		}
	}
	if len(got) != 4 {
		t.Errorf("kept %d systems, want the 3 gubernator and 1 ratelimit", len(got))
	}
}
