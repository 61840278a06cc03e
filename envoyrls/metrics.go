package envoyrls

import "github.com/prometheus/client_golang/prometheus"

// Outcomes of weir_envoy_requests_total.
const (
	outcomeOK        = "ok"         // every descriptor OK
	outcomeOverLimit = "over_limit" // some descriptor over its limit
	outcomeInvalid   = "invalid"    // INVALID_ARGUMENT
	outcomeError     = "error"      // the node could not decide
)

type metrics struct {
	requests      *prometheus.CounterVec
	unknownDomain prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_envoy_requests_total",
			Help: "Envoy RLS ShouldRateLimit calls by outcome (ok, over_limit, invalid, error).",
		}, []string{"outcome"}),
		unknownDomain: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_envoy_unknown_domain_requests_total",
			Help: "Envoy RLS calls for a domain no limit answers; they were answered OK with no limit.",
		}),
	}
	for _, o := range []string{outcomeOK, outcomeOverLimit, outcomeInvalid, outcomeError} {
		m.requests.WithLabelValues(o) // export every outcome from the start
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.unknownDomain} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
