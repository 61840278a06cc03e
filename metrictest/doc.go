// Package metrictest reads metric values out of a Prometheus registry, for
// tests that assert what a component counted. It is test support: only
// _test.go files import it.
//
//	reg := prometheus.NewRegistry()
//	// ... build the component on reg, drive it ...
//	if got := metrictest.Value(t, reg, "weir_freezes_total"); got != 1 {
//		t.Fatalf("freezes %v, want 1", got)
//	}
package metrictest
