package leaselink

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/lease"
)

// metrics exports the lease ledgers' counts per policy limit (never per
// key), the holder's and the owner's (Deps.Grants): the ledgers keep them,
// and a scrape reads them under their locks, so the decision path pays
// nothing for them.
type metrics struct {
	l     *Link
	units *prometheus.Desc
	decs  *prometheus.Desc
	waits *prometheus.Desc
	rpcs  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, l *Link) (*metrics, error) {
	m := &metrics{
		l: l,
		units: prometheus.NewDesc("weir_lease_units_total",
			"Lease units by limit and event: granted, credited (returned unspent and given back) and expired (left in leases that ended unsettled) at owners; received, spent, returned, stranded (unspent at expiry) and lost (returned in a refresh that failed) at peers.",
			[]string{"limit", "event"}, nil),
		decs: prometheus.NewDesc("weir_lease_decisions_total",
			"Decisions of leasable limits at a non-owner by outcome: spent (admitted from leases), refused (denied from the owner's last denial), forwarded (asked the owner). Lease hit ratio = (spent + refused) / all.",
			[]string{"limit", "outcome"}, nil),
		waits: prometheus.NewDesc("weir_lease_waits_total",
			"Requests on leasable keys at a non-owner that waited for a lease refresh to the owner (a refresh in flight, or due: used up, expired or saturated; one refresh answers all that wait) instead of forwarding; each is also counted in weir_lease_decisions_total by how it ended.",
			[]string{"limit"}, nil),
		rpcs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_lease_rpcs_total",
			Help: "Lease refresh RPCs this node sent, by result (ok, error).",
		}, []string{"result"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m, m.rpcs} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// Describe implements prometheus.Collector for the ledger counts.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.units
	ch <- m.decs
	ch <- m.waits
}

// Collect implements prometheus.Collector for the ledger counts.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	var gs map[string]lease.GrantorStats
	if m.l.deps.Grants != nil {
		gs = m.l.deps.Grants.GrantStats()
	}
	m.l.hmu.Lock()
	hs := m.l.h.Stats()
	m.l.hmu.Unlock()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for limit, s := range gs {
		counter(m.units, s.GrantedUnits, limit, "granted")
		counter(m.units, s.CreditedUnits, limit, "credited")
		counter(m.units, s.ExpiredUnits, limit, "expired")
	}
	for limit, s := range hs {
		counter(m.units, s.ReceivedUnits, limit, "received")
		counter(m.units, s.SpentUnits, limit, "spent")
		counter(m.units, s.ReturnedUnits, limit, "returned")
		counter(m.units, s.StrandedUnits, limit, "stranded")
		counter(m.units, s.LostUnits, limit, "lost")
		counter(m.decs, s.Spends, limit, "spent")
		counter(m.decs, s.Refusals, limit, "refused")
		counter(m.decs, s.Forwards, limit, "forwarded")
		counter(m.waits, s.Waits, limit)
	}
}

// rpc counts one refresh this node sent.
func (m *metrics) rpc(err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.rpcs.WithLabelValues(result).Inc()
}
