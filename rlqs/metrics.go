package rlqs

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are a Server's Prometheus metrics, labelled by policy limit
// ("none" for buckets no limit governs).
type metrics struct {
	streams      prometheus.Gauge
	buckets      *prometheus.GaugeVec   // limit, kind
	assignments  *prometheus.CounterVec // limit, action
	heldUnits    *prometheus.GaugeVec   // limit
	leasedUnits  *prometheus.CounterVec // limit
	returnedUnit *prometheus.CounterVec // limit
	strandedUnit *prometheus.CounterVec // limit
	requests     *prometheus.CounterVec // limit, decision
	reports      *prometheus.CounterVec // outcome
	calls        *prometheus.CounterVec // outcome
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	lim := []string{"limit"}
	m := &metrics{
		streams: prometheus.NewGauge(prometheus.GaugeOpts{Name: "weir_rlqs_streams",
			Help: "RLQS streams open on this node."}),
		buckets: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "weir_rlqs_buckets",
			Help: "RLQS buckets subscribed on this node's streams, by limit and how they are served (leased, allow, unservable, ambiguous)."}, []string{"limit", "kind"}),
		assignments: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_rlqs_assignments_total",
			Help: "RLQS bucket actions sent, by limit and action (token_bucket, token_bucket_unchanged, deny, allow, abandon)."}, []string{"limit", "action"}),
		heldUnits: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "weir_rlqs_units_held",
			Help: "Units this node's RLQS streams hold on lease, by limit."}, lim),
		leasedUnits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_rlqs_units_leased_total",
			Help: "Units leased to this node's RLQS streams, by limit."}, lim),
		returnedUnit: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_rlqs_units_returned_total",
			Help: "Units RLQS streams returned to the owners and had credited, by limit."}, lim),
		strandedUnit: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_rlqs_units_stranded_total",
			Help: "Units leased to finished RLQS buckets that were neither returned nor admitted by the Envoy (its reports), by limit."}, lim),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_rlqs_requests_total",
			Help: "Requests Envoys reported deciding locally, by limit and decision (allowed, denied)."}, []string{"limit", "decision"}),
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_rlqs_reports_total",
			Help: "RLQS usage reports received, by outcome (ok, invalid, too_many_buckets)."}, []string{"outcome"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "weir_rlqs_lease_calls_total",
			Help: "Lease refreshes RLQS streams sent to owners, by outcome (ok, error)."}, []string{"outcome"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.streams, m.buckets, m.assignments, m.heldUnits, m.leasedUnits, m.returnedUnit, m.strandedUnit, m.requests, m.reports, m.calls} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func label(l string) string {
	if l == "" {
		return "none"
	}
	return l
}

func (m *metrics) subscribed(r resolution) {
	m.buckets.WithLabelValues(label(r.label), r.kind.String()).Inc()
}
func (m *metrics) unsubscribed(r resolution) {
	m.buckets.WithLabelValues(label(r.label), r.kind.String()).Dec()
}
func (m *metrics) assigned(l, action string) { m.assignments.WithLabelValues(label(l), action).Inc() }
func (m *metrics) held(l string, units int64) {
	m.heldUnits.WithLabelValues(label(l)).Add(float64(units))
}
func (m *metrics) leased(l string, units int64) {
	m.leasedUnits.WithLabelValues(label(l)).Add(float64(units))
	m.held(l, units)
}
func (m *metrics) returned(l string, units int64) {
	if units > 0 {
		m.returnedUnit.WithLabelValues(label(l)).Add(float64(units))
	}
}
func (m *metrics) stranded(l string, units int64) {
	m.strandedUnit.WithLabelValues(label(l)).Add(float64(units))
}
func (m *metrics) usage(l string, allowed, denied uint64) {
	m.requests.WithLabelValues(label(l), "allowed").Add(float64(allowed))
	m.requests.WithLabelValues(label(l), "denied").Add(float64(denied))
}
func (m *metrics) call(err error) {
	if err != nil {
		m.calls.WithLabelValues("error").Inc()
		return
	}
	m.calls.WithLabelValues("ok").Inc()
}
