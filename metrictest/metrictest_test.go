package metrictest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestValue_sumsMatchingSamples(t *testing.T) {
	reg := prometheus.NewRegistry()
	plain := prometheus.NewCounter(prometheus.CounterOpts{Name: "plain_total", Help: "h"})
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vec_total", Help: "h"}, []string{"reason", "peer"})
	reg.MustRegister(plain, vec)
	plain.Add(3)
	vec.WithLabelValues("shape", "a").Add(1)
	vec.WithLabelValues("shape", "b").Add(2)
	vec.WithLabelValues("skew", "a").Add(4)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"plain_total", nil, 3},
		{"vec_total", nil, 7},
		{"vec_total", []string{"reason", "shape"}, 3},
		{"vec_total", []string{"reason", "shape", "peer", "b"}, 2},
		{"vec_total", []string{"reason", "group"}, 0},
		{"absent_total", nil, 0},
	} {
		if got := Value(t, reg, c.name, c.labels...); got != c.want {
			t.Errorf("Value(%s, %q) = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}
