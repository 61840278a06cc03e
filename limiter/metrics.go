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

type metrics struct {
	decisions   *prometheus.CounterVec
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

// record counts d, decided at now, per limit and logs denied keys
// (rate-limited).
func (l *Limiter) record(ms []policy.Match, d *Decision, now int64) {
	for i, ld := range d.Limits {
		result := resultAllowed
		switch {
		case ld.TooCostly:
			result = resultTooCostly
		case ld.Shadow && !ld.Allowed:
			result = resultShadowDenied
		case !ld.Allowed:
			result = resultDenied
		case !d.Allowed:
			continue // admitted by this limit, refused by another
		}
		l.metrics.decisions.WithLabelValues(ld.Name, result).Inc()
		if result != resultAllowed {
			l.denied.note(now, ms[i].Key, ld.Name, result)
		}
	}
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
