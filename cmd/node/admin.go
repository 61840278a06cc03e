package main

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/pprof"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weirhq/weir/admin"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/limitkey"
	"github.com/weirhq/weir/policy"
	"github.com/weirhq/weir/shadow"
)

// adminHandler serves the read-only admin endpoints (package admin) and
// nothing else; it is mounted on the admin listener only (adminserver.go).
func (n *node) adminHandler(lim *limiter.Limiter, reg prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET "+shadow.Path, n.shadow.Handler(n.name))
	mux.HandleFunc("GET "+admin.StatusPath, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, n.status(lim, reg))
	})
	mux.HandleFunc("GET "+admin.InspectPath, func(w http.ResponseWriter, r *http.Request) {
		keys := r.URL.Query()["key"]
		if len(keys) == 0 || len(keys) > admin.MaxInspectKeys {
			http.Error(w, "inspect: give 1 to 100 key parameters", http.StatusBadRequest)
			return
		}
		out := make([]admin.KeyState, len(keys))
		for i, k := range keys {
			out[i] = n.inspect(lim, k)
		}
		writeJSON(w, out)
	})
	// Go's profiler, for operators only (this listener, never the public
	// port): /debug/pprof/profile?seconds=N (N up to adminProfileMax),
	// heap, goroutine, trace.
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// statusFigures are the metrics /admin/status sums over their labels; any
// metric whose name starts with one of statusPrefixes is included too (the
// lease and region families, as they land).
var (
	statusFigures  = []string{"weir_decisions_total", "weir_fallback_decisions_total", "weir_store_errors_total", "weir_writebehind_lag_seconds", "weir_writebehind_pending", "weir_active_keys", "weir_forwards_total", "weir_envoy_requests_total"}
	statusPrefixes = []string{"weir_lease_", "weir_region_"}
	breakerStates  = []string{"closed", "half_open", "open"}
)

func (n *node) status(lim *limiter.Limiter, reg prometheus.Gatherer) admin.Status {
	st := admin.Status{Node: n.name, PolicyVersion: lim.Policy().Version, Members: []string{n.name}, Breakers: map[string]string{}, Figures: map[string]float64{}}
	if n.members != nil {
		st.Members = st.Members[:0]
		for _, m := range n.members.Members() {
			st.Members = append(st.Members, m.Name)
		}
		slices.Sort(st.Members)
	}
	fams, _ := reg.Gather() // a partial gather is still worth showing
	for _, f := range fams {
		name := f.GetName()
		switch {
		case name == "weir_breaker_state":
			for _, m := range f.GetMetric() {
				v := int(m.GetGauge().GetValue())
				if v >= 0 && v < len(breakerStates) && len(m.GetLabel()) > 0 {
					st.Breakers[m.GetLabel()[0].GetValue()] = breakerStates[v]
				}
			}
		case slices.Contains(statusFigures, name) || slices.ContainsFunc(statusPrefixes, func(p string) bool { return strings.HasPrefix(name, p) }):
			for _, m := range f.GetMetric() {
				st.Figures[name] += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
			}
		}
	}
	return st
}

// inspect reads key's state from owner memory and works out, with the
// pure GCRA functions, what a request of cost 1 would get now. Nothing is
// stored: no quota is consumed. The numbers are the limit's own, before
// tier and tenant overrides.
func (n *node) inspect(lim *limiter.Limiter, key string) admin.KeyState {
	ks := admin.KeyState{Key: key}
	parts, ok := limitkey.Split(key)
	group, limitName := limitkey.Unescape(parts.Tag), parts.Name // group unescaped, as owner memory shards by it
	if !ok {
		ks.Error = "not a weir key (weir:{group}:limit:...)"
		return ks
	}
	l := lim.Policy().Limit(limitName)
	if l == nil || l.Envoy.Unlimited {
		ks.Error = "no limit " + limitName + " in the current policy"
		return ks
	}
	// The key's own numbers (its tenant's tier and overrides) where the key
	// names its tenant; the limit's defaults otherwise.
	params := l.Params
	if ps, m := lim.Policy().ParamsForKey(key); m == policy.KeyExact {
		params = ps[0]
	}
	ks.Limit, ks.Burst = l.Name, params.Burst
	if l.Kind == policy.KindConcurrency {
		n.inspectPermits(&ks, group, key)
		return ks
	}
	if ks.Held = n.state.mem.Has(group, key); !ks.Held {
		return ks
	}
	tat := n.state.mem.Get(group, key)
	now := n.state.now().UnixNano()
	r, err := gcra.Decide(tat, now, params, 1)
	if err != nil {
		ks.Error = err.Error()
		return ks
	}
	// The admin API keeps microseconds; waits round up, never shorter.
	ks.TAT = tat / int64(time.Microsecond)
	ks.Remaining, ks.RetryAfterUS, ks.ResetAfterUS = r.Remaining, gcra.CeilMicros(r.RetryAfter), gcra.CeilMicros(tat-now)
	if r.Allowed {
		ks.Remaining++ // r counts the peeked request as admitted
	}
	return ks
}

// inspectPermits fills ks from a concurrency key's live permits in owner
// memory: units in flight of the bound (ks.Burst, the key's own
// max_in_flight), free slots, the wait until a permit's expiry frees one
// when none is free (a release frees it sooner), and each permit's id
// prefix, cost and time left. A permit's id is its secret: only its first
// 4 bytes are shown.
func (n *node) inspectPermits(ks *admin.KeyState, group, key string) {
	ks.Kind = string(policy.KindConcurrency)
	now := n.state.now().UnixNano()
	_, _, permits, ok := n.state.owner.Permits(group, key, now)
	if ks.Held = ok; !ok {
		ks.Remaining = ks.Burst
		return
	}
	for _, p := range permits {
		ks.InFlight += p.Cost
		left := p.Expiry - now
		ks.Permits = append(ks.Permits, admin.PermitState{ID: hex.EncodeToString(p.ID[:4]), Cost: p.Cost, ExpiresInUS: gcra.CeilMicros(left)})
		ks.ResetAfterUS = max(ks.ResetAfterUS, gcra.CeilMicros(left))
	}
	ks.Remaining = max(ks.Burst-ks.InFlight, 0)
	if ks.Remaining == 0 && len(permits) > 0 {
		ks.RetryAfterUS = gcra.CeilMicros(permits[0].Expiry - now) // earliest expiry first
	}
}
