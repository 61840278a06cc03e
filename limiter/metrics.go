package limiter

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/policy"
)

// Results recorded per limit in weir_decisions_total.
const (
	resultAllowed      = "allowed"       // the request was admitted
	resultDenied       = "denied"        // this enforced limit refused it
	resultShadowDenied = "shadow_denied" // this shadow limit would have refused it
	resultTooCostly    = "too_costly"    // cost above this limit's burst
)

// result indexes the results above in a limit's cached counters.
type result uint8

const (
	allowed result = iota
	denied
	shadowDenied
	tooCostly
	numResults
)

func (r result) String() string {
	switch r {
	case denied:
		return resultDenied
	case shadowDenied:
		return resultShadowDenied
	case tooCostly:
		return resultTooCostly
	}
	return resultAllowed
}

type metrics struct {
	decisions *prometheus.CounterVec
	// counters caches decisions' children for the current policy.
	counters    atomic.Pointer[policyCounters]
	unmatched   prometheus.Counter
	storeErrors prometheus.Counter
	fallbacks   *prometheus.CounterVec
	latency     prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_decisions_total",
			Help: "Decisions per limit and result (allowed, denied, shadow_denied, too_costly).",
		}, []string{"limit", "result"}),
		unmatched: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_decisions_unmatched_total",
			Help: "Requests that matched no limit and were allowed.",
		}),
		storeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_store_errors_total",
			Help: "Store calls (Redis, owner nodes) that failed; each led to a fallback decision or an error.",
		}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_fallback_decisions_total",
			Help: "Decisions made by a limit's failure policy because a dependency could not decide, by limit, reason and mode (open, closed, local).",
		}, []string{"limit", "reason", "mode"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "weir_decision_duration_seconds",
			Help:    "Time to decide one matched request, store call included.",
			Buckets: []float64{5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1},
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.decisions, m.unmatched, m.storeErrors, m.fallbacks, m.latency} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// record counts d, decided at now under p, per limit and logs denied keys
// (rate-limited).
func (l *Limiter) record(p *policy.Policy, ms []policy.Match, d *Decision, now int64) {
	counters := l.metrics.countersFor(p)
	for i, ld := range d.Limits {
		r := allowed
		switch {
		case ld.TooCostly:
			r = tooCostly
		case ld.Shadow && !ld.Allowed:
			r = shadowDenied
		case !ld.Allowed:
			r = denied
		case !d.Allowed:
			continue // admitted by this limit, refused by another
		}
		counters.counter(ms[i].Limit, r).Inc()
		if r != allowed {
			l.denied.note(now, ms[i].Key, ld.Name, r.String())
		}
	}
}

// policyCounters holds weir_decisions_total's children for the limits of
// one policy, so that counting a decision hashes no label values and takes
// no lock. A child is created on its first use, as WithLabelValues does,
// so results never seen are not exported. Safe for concurrent use.
type policyCounters struct {
	policy *policy.Policy
	vec    *prometheus.CounterVec
	limits map[*policy.Limit]*[numResults]atomic.Pointer[counterRef] // read-only once built
}

type counterRef struct{ c prometheus.Counter }

// countersFor returns the counters of p, building them when the policy has
// changed since the last call. Requests of the old and the new policy may
// alternate for a moment after a reload; each rebuild is one map per policy.
func (m *metrics) countersFor(p *policy.Policy) *policyCounters {
	if c := m.counters.Load(); c != nil && c.policy == p {
		return c
	}
	c := &policyCounters{policy: p, vec: m.decisions, limits: make(map[*policy.Limit]*[numResults]atomic.Pointer[counterRef], len(p.Limits))}
	for _, lim := range p.Limits {
		c.limits[lim] = new([numResults]atomic.Pointer[counterRef])
	}
	m.counters.Store(c)
	return c
}

// counter returns the child for lim and r.
func (c *policyCounters) counter(lim *policy.Limit, r result) prometheus.Counter {
	refs, ok := c.limits[lim]
	if !ok { // not one of the policy's limits: look it up every time
		return c.vec.WithLabelValues(lim.Name, r.String())
	}
	if ref := refs[r].Load(); ref != nil {
		return ref.c
	}
	ref := &counterRef{c: c.vec.WithLabelValues(lim.Name, r.String())}
	refs[r].Store(ref) // a racing store holds the same child
	return ref.c
}

// deniedLog writes denied keys to the log at most once per interval, with
// a count of what it held back, so that a flood of denials costs one line.
// It measures the interval on the requests' own time stamps (nanoseconds),
// so a denial costs no clock read, and takes no lock: the denial that moves
// last forward by compare-and-swap writes the line.
type deniedLog struct {
	logger     *slog.Logger
	interval   int64        // nanoseconds; 0 disables the log
	last       atomic.Int64 // stamp of the last line written
	suppressed atomic.Int64 // denials held back since then
}

func newDeniedLog(logger *slog.Logger, interval time.Duration) *deniedLog {
	return &deniedLog{logger: logger, interval: interval.Nanoseconds()}
}

// note records a denial of key by limit in a request stamped now.
func (d *deniedLog) note(now int64, key, limit, result string) {
	if d.interval == 0 {
		return
	}
	last := d.last.Load()
	if (last != 0 && now >= last && now-last < d.interval) || !d.last.CompareAndSwap(last, now) {
		d.suppressed.Add(1)
		return
	}
	d.logger.Info("key denied", "key", key, "limit", limit, "result", result, "suppressed_since_last", d.suppressed.Swap(0))
}
