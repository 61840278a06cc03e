package regionlink

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/region"
)

func TestLink_metrics_perLimitNeverPerKey(t *testing.T) {
	n, clk := newNet(), newClock()
	k, k2 := keyHomedIn(t, "eu", 0), keyHomedIn(t, "eu", 1)
	euReg, usReg := prometheus.NewRegistry(), prometheus.NewRegistry()
	newLinkReg(t, n, clk, "eu", "eu-1", func(string) string { return "eu-1" }, euReg)
	us := newLinkReg(t, n, clk, "us", "us-1", func(string) string { return "us-1" }, usReg)
	rounds(t, clk, 15, 200, map[*Link][]string{us: {k, k2}})

	want := 2 * (region.Whole - testShares().Floor).Fraction()
	if got := testutil.ToFloat64(gaugeFrom(t, usReg, "weir_region_share", "glob", "us")); got != want {
		t.Errorf("us share sum = %v, want %v (two keys)", got, want)
	}
	if got := testutil.ToFloat64(gaugeFrom(t, euReg, "weir_region_reserved", "glob", "us")); got != want {
		t.Errorf("eu reserves %v for us, want %v", got, want)
	}
	n.cut("eu-1", true)
	rounds(t, clk, 12, 200, map[*Link][]string{us: {k, k2}})
	if got := testutil.ToFloat64(gaugeFrom(t, usReg, "weir_region_keys_at_floor", "glob")); got != 2 {
		t.Errorf("us keys at floor after the cut = %v, want 2", got)
	}
	if got := testutil.ToFloat64(gaugeFrom(t, euReg, "weir_region_cut_off_regions", "glob")); got != 1 {
		t.Errorf("eu sees %v regions cut off, want 1", got)
	}
	for _, reg := range []*prometheus.Registry{euReg, usReg} {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				for _, lp := range m.GetLabel() {
					if strings.Contains(lp.GetValue(), "{") {
						t.Errorf("%s has a key as label %s=%q", mf.GetName(), lp.GetName(), lp.GetValue())
					}
				}
			}
		}
	}
}

// gaugeFrom returns the one series of name with the given label values
// from reg, as a collector testutil can read.
func gaugeFrom(t *testing.T, reg *prometheus.Registry, name string, labels ...string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var vals []string
			for _, lp := range m.GetLabel() {
				vals = append(vals, lp.GetValue())
			}
			if strings.Join(vals, ",") == strings.Join(labels, ",") {
				g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "copy"})
				g.Set(m.GetGauge().GetValue())
				return g
			}
		}
	}
	t.Fatalf("no %s%v", name, labels)
	return nil
}

// TestLink_concurrentDecisionsAndRounds runs decisions of global keys from
// several goroutines while rounds, reports and scrapes run, for the race
// detector, and checks every decision got a usable limit.
func TestLink_concurrentDecisionsAndRounds(t *testing.T) {
	n, clk := newNet(), newClock()
	reg := prometheus.NewRegistry()
	eu := newLinkReg(t, n, clk, "eu", "eu-1", func(string) string { return "eu-1" }, reg)
	us := newLink(t, n, clk, "us", "us-1", func(string) string { return "us-1" })
	keys := []string{keyHomedIn(t, "eu", 0), keyHomedIn(t, "us", 0), key("plain", "x")}
	var wg sync.WaitGroup
	for w := range 4 {
		l := []*Link{eu, us}[w%2]
		wg.Go(func() {
			m := tats{}
			for i := range 500 {
				k := keys[i%len(keys)]
				out, ok, release := l.Enforce(1, "grp", []string{k}, defsOf([]string{k}...), []gcra.Limit{g}, 1, int64(i), m.rescale)
				release()
				if !ok || out[0].Validate() != nil {
					t.Errorf("decision %d of %s: %+v ok %v", i, k, out, ok)
					return
				}
			}
		})
	}
	for range 20 {
		clk.Advance(testShares().Interval)
		eu.Round(context.Background())
		us.Round(context.Background())
		if _, err := reg.Gather(); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}
