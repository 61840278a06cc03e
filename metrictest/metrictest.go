package metrictest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Value returns the sum of the samples of the counter or gauge (or their
// vecs) called name in g whose labels include every name, value pair of
// labels; 0 when there are none. An odd number of labels fails the test, as does
// a Gather error.
func Value(t testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	if len(labels)%2 != 0 {
		t.Fatalf("metrictest: labels %q are not name, value pairs", labels)
	}
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if has(m.GetLabel(), labels) {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// has reports whether pairs (name, value, ...) are all among got.
func has(got []*dto.LabelPair, pairs []string) bool {
	for i := 0; i < len(pairs); i += 2 {
		found := false
		for _, lp := range got {
			if lp.GetName() == pairs[i] && lp.GetValue() == pairs[i+1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
