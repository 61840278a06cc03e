package owner

import "github.com/prometheus/client_golang/prometheus"

// permitMetrics are the owner's concurrency-limit metrics, labelled by
// limit (decide.Def.Name).
type permitMetrics struct {
	live        *prometheus.GaugeVec   // weir_permits_live{limit}
	total       *prometheus.CounterVec // weir_permits_total{limit,result=acquired|denied}
	released    *prometheus.CounterVec // weir_permits_released_total{limit,result=released|not_held}
	expired     *prometheus.CounterVec // weir_permits_expired_total{limit}
	renewed     *prometheus.CounterVec // weir_permits_renewed_total{limit,result=renewed|not_held}
	storeErrors *prometheus.CounterVec // weir_permit_store_errors_total{op=acquire|release|renew}
}

func newPermitMetrics(reg prometheus.Registerer) (*permitMetrics, error) {
	m := &permitMetrics{
		live: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "weir_permits_live", Help: "Slots held by live permits of concurrency limits in owner memory, refreshed at each sweep.",
		}, []string{"limit"}),
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_permits_total", Help: "Permit requests decided by this owner, by result: acquired or denied.",
		}, []string{"limit", "result"}),
		released: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_permits_released_total", Help: "Releases of permits, by result: released, or not_held (unknown, expired or already released).",
		}, []string{"limit", "result"}),
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_permits_expired_total", Help: "Permits dropped because their TTL passed (never released): callers that crashed or forgot to release.",
		}, []string{"limit"}),
		renewed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_permits_renewed_total", Help: "Renewals of permits, by result: renewed or not_held.",
		}, []string{"limit", "result"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_permit_store_errors_total", Help: "Failed writes of permit sets to Redis, by operation: an acquire is then refused and rolled back; a release or renew stays done in memory.",
		}, []string{"op"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.live, m.total, m.released, m.expired, m.renewed, m.storeErrors} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
