package regionlink

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are a Link's series. Gauges are labelled by limit (the policy
// limit's name) and region, never by key: they are computed at scrape time
// from the Member and the Home (region.Member.Stats, region.Home.Stats).
type metrics struct {
	reports *prometheus.CounterVec
	grants  *prometheus.CounterVec
	applied prometheus.Counter
	empty   *prometheus.CounterVec
	link    *Link

	share, reserved, demand, cutOff, atFloor *prometheus.Desc
}

func newMetrics(l *Link, reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		link: l,
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_region_reports_total",
			Help: "Demand reports this node sent to each home region, by result: ok, failed (no reply in time: shares stand until their grants expire), misaddressed.",
		}, []string{"home", "result"}),
		grants: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_region_grants_total",
			Help: "Shares this node granted as a home, by limit and result: above_floor or floor (nothing more was free, or a quiet period).",
		}, []string{"limit", "result"}),
		applied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_region_grants_applied_total",
			Help: "Grants this node took up from home regions' replies.",
		}),
		empty: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_region_share_empty_total",
			Help: "Decisions denied because a global key's regional share admits nothing (it holds no whole unit of the burst, which happens only for a burst below the number of regions), by limit.",
		}, []string{"limit"}),
		share: prometheus.NewDesc("weir_region_share",
			"Sum of the shares (fractions of the global limit) this node enforces on its global keys that hold a grant, by limit and region. Sum over the region's nodes for the region's total.",
			[]string{"limit", "region"}, nil),
		reserved: prometheus.NewDesc("weir_region_reserved",
			"As a home: sum over this node's keys of the share each region may be using (at least its floor), by limit and region.",
			[]string{"limit", "region"}, nil),
		demand: prometheus.NewDesc("weir_region_demand",
			"As a home: sum over this node's keys of the demand each region last reported (fractions of the global rate), by limit and region.",
			[]string{"limit", "region"}, nil),
		cutOff: prometheus.NewDesc("weir_region_cut_off_regions",
			"As a home: regions that reported on some key of the limit but not within a grant TTL (cut off, or gone).",
			[]string{"limit"}, nil),
		atFloor: prometheus.NewDesc("weir_region_keys_at_floor",
			"Global keys this node enforces at the floor because their grant expired (cut off from their home, or no grant renewed), by limit.",
			[]string{"limit"}, nil),
	}
	for _, c := range []prometheus.Collector{m.reports, m.grants, m.applied, m.empty, m} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Describe implements prometheus.Collector for the scrape-time gauges.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.share, m.reserved, m.demand, m.cutOff, m.atFloor} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: it reads the Member's and the
// Home's state grouped by limit.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	l := m.link
	byLimit := func(key string) string {
		return label(l.deps.LimitName(key))
	}
	now := l.mono()
	l.memberMu.Lock()
	ms := l.member.Stats(now, byLimit)
	l.memberMu.Unlock()
	l.homeMu.Lock()
	hs := l.home.Stats(now, byLimit)
	l.homeMu.Unlock()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for name, s := range ms {
		gauge(m.share, s.Share.Fraction(), name, l.cfg.Region)
		gauge(m.atFloor, float64(s.AtFloor), name)
	}
	for name, s := range hs {
		for r, v := range s.Reserved {
			gauge(m.reserved, v.Fraction(), name, r)
		}
		for r, v := range s.Demand {
			gauge(m.demand, v, name, r)
		}
		gauge(m.cutOff, float64(len(s.Silent)), name)
	}
}

// label is a limit's name for a metric; keys whose limit left the policy
// are counted under "unknown".
func label(name string) string {
	if name == "" {
		return "unknown"
	}
	return name
}

var _ prometheus.Collector = (*metrics)(nil)
