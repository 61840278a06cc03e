package owner

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/reservation"
)

// reserveMetrics counts reservations per rate key of each record, labelled
// with the key's limit name (decide.Def.Name): a record over two limits
// counts once under each.
type reserveMetrics struct {
	// records is weir_reservations_total{limit,result}: reserved, settled,
	// expired (swept, evicted from a full key, or lost in a hand-off: all
	// charged as reserved) and unknown (a settle that found no record).
	records *prometheus.CounterVec
	// units is weir_reservation_units_total{limit,kind}: reserved (charged
	// up front), and of settlements refunded, kept, extra and forgiven
	// (gcra.Settlement).
	units *prometheus.CounterVec
}

func newReserveMetrics(reg prometheus.Registerer) (*reserveMetrics, error) {
	m := &reserveMetrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_reservations_total",
			Help: "Reservations at their owner per rate limit, by result: reserved, settled, expired (not settled in time, evicted from a key holding its burst of open reservations, or lost in a hand-off: charged as reserved), unknown (a settle that found no open reservation).",
		}, []string{"limit", "result"}),
		units: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_reservation_units_total",
			Help: "Units of reservations per rate limit, by kind: reserved (charged up front), refunded (given back by a settle), kept (of a refund, not given back: the key had rested past them or later decisions rely on them), extra (charged beyond the reservation), forgiven (of an excess, not charged: the debt cap).",
		}, []string{"limit", "kind"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.records, m.units} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *reserveMetrics) reserved(rec reservation.Record) {
	for _, k := range rec.Keys {
		m.records.WithLabelValues(k.Name, "reserved").Inc()
		m.units.WithLabelValues(k.Name, "reserved").Add(float64(k.Res.Cost))
	}
}

func (m *reserveMetrics) expired(recs []reservation.Record) {
	for _, rec := range recs {
		for _, k := range rec.Keys {
			m.records.WithLabelValues(k.Name, "expired").Inc()
		}
	}
}

func (m *reserveMetrics) settled(k reservation.Key, s gcra.Settlement) {
	m.records.WithLabelValues(k.Name, "settled").Inc()
	for kind, n := range map[string]int64{"refunded": s.Refunded, "kept": s.Kept, "extra": s.Extra, "forgiven": s.Forgiven} {
		if n > 0 {
			m.units.WithLabelValues(k.Name, kind).Add(float64(n))
		}
	}
}

// unknown counts a settle of r that found no record, under r's limits.
func (m *reserveMetrics) unknown(r *decide.Request) {
	for i := range r.Keys {
		m.records.WithLabelValues(defName(r, i), "unknown").Inc()
	}
}
