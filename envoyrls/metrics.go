package envoyrls

import "github.com/prometheus/client_golang/prometheus"

// Outcomes of weir_envoy_requests_total.
const (
	outcomeOK        = "ok"         // every descriptor OK
	outcomeOverLimit = "over_limit" // some descriptor over its limit
	outcomeInvalid   = "invalid"    // INVALID_ARGUMENT
	outcomeError     = "error"      // the node could not decide
)

// metrics holds weir_envoy_requests_total's children resolved once, so
// that counting a call hashes no label value.
type metrics struct {
	requests      *prometheus.CounterVec
	ok            prometheus.Counter
	overLimit     prometheus.Counter
	invalid       prometheus.Counter
	failed        prometheus.Counter // outcome "error"
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
	// every outcome is exported from the start
	m.ok = m.requests.WithLabelValues(outcomeOK)
	m.overLimit = m.requests.WithLabelValues(outcomeOverLimit)
	m.invalid = m.requests.WithLabelValues(outcomeInvalid)
	m.failed = m.requests.WithLabelValues(outcomeError)
	if reg != nil {
		for _, c := range []prometheus.Collector{m.requests, m.unknownDomain} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
