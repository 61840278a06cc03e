package clientlease

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	holders  prometheus.Gauge
	requests *prometheus.CounterVec
	items    *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		holders: prometheus.NewGauge(prometheus.GaugeOpts{Name: "weir_client_lease_holders",
			Help: "Client lease holders (weir.v1.Leases streams) open on this node."}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_client_lease_requests_total",
			Help: "Client lease requests answered (ok) or refused as bad input (invalid)."}, []string{"result"}),
		items: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_client_lease_items_total",
			Help: "Client lease refresh items by outcome (settled, granted, denied, capped, busy, not_leasable)."}, []string{"outcome"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.holders, m.requests, m.items} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
