package policy

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/decide"
	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/limitkey"
)

const sec = int64(time.Second)

// concurrencyHead is a concurrency limit without its own numbers; cases
// append fields to it.
const concurrencyHead = "limits:\n  - name: jobs\n    kind: concurrency\n    match: [tenant]\n"

func TestParse_concurrencyAccepted(t *testing.T) {
	type want struct {
		max   int64
		ttl   time.Duration
		fail  FailureMode
		cons  Consistency
		scope Scope
	}
	std := want{20, 30 * time.Second, FailClosed, ConsistencyFast, ScopeRegion}
	cases := map[string]struct {
		top, fields string
		want        want
	}{
		"defaults":          {"", "    max_in_flight: 20\n", std},
		"min max_in_flight": {"", "    max_in_flight: 1\n", want{1, 30 * time.Second, FailClosed, ConsistencyFast, ScopeRegion}},
		"max max_in_flight": {"", "    max_in_flight: 10000\n", want{10000, 30 * time.Second, FailClosed, ConsistencyFast, ScopeRegion}},
		"min ttl":           {"", "    max_in_flight: 20\n    ttl: 1s\n", want{20, time.Second, FailClosed, ConsistencyFast, ScopeRegion}},
		"max ttl":           {"", "    max_in_flight: 20\n    ttl: 24h\n", want{20, 24 * time.Hour, FailClosed, ConsistencyFast, ScopeRegion}},
		"open":              {"", "    max_in_flight: 20\n    on_failure: open\n", want{20, 30 * time.Second, FailOpen, ConsistencyFast, ScopeRegion}},
		"closed written":    {"", "    max_in_flight: 20\n    on_failure: closed\n", std},
		"fast, region":      {"", "    max_in_flight: 20\n    consistency: fast\n    scope: region\n", std},
		"default local":     {"defaults: {on_failure: local}\n", "    max_in_flight: 20\n", std},
		"default open":      {"defaults: {on_failure: open}\n", "    max_in_flight: 20\n", want{20, 30 * time.Second, FailOpen, ConsistencyFast, ScopeRegion}},
		"default strict":    {"defaults: {consistency: strict}\n", "    max_in_flight: 20\n", std},
		"default global":    {"defaults: {scope: global}\n", "    max_in_flight: 20\n", std},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := mustParse(t, tc.top+concurrencyHead+tc.fields)
			l := p.Limit("jobs")
			got := want{l.MaxInFlight, l.TTL, l.OnFailure, l.Consistency, l.Scope}
			if l.Kind != KindConcurrency || got != tc.want {
				t.Fatalf("kind %q, got %+v; want concurrency %+v", l.Kind, got, tc.want)
			}
			if wantP := (gcra.Limit{Burst: tc.want.max, Interval: tc.want.ttl.Nanoseconds()}); l.Params != wantP {
				t.Errorf("Params = %+v, want %+v", l.Params, wantP)
			}
			if l.Rate != (Rate{}) || l.Burst != 0 || l.ReserveTTL != 0 || l.Lease != nil || l.SharedFallback || l.Fallback != (gcra.Limit{}) {
				t.Errorf("rate fields set on a concurrency limit: %+v", l)
			}
			if err := CheckPermitParams(l.Params); err != nil {
				t.Errorf("CheckPermitParams(%+v) = %v", l.Params, err)
			}
		})
	}
}

func TestParse_concurrencyShadowRefused(t *testing.T) {
	for name, doc := range map[string]string{
		"limit":    concurrencyHead + "    max_in_flight: 3\n    shadow: true\n",
		"tier":     "tiers: {pro: {jobs: {shadow: true}}}\n" + concurrencyHead + "    max_in_flight: 3\n",
		"override": "tenants: {acme: {overrides: {jobs: {shadow: true}}}}\n" + concurrencyHead + "    max_in_flight: 3\n",
	} {
		_, err := Parse("t", []byte(doc))
		if err == nil || !strings.Contains(err.Error(), "shadow: a concurrency limit cannot be shadow") {
			t.Errorf("%s: err = %v, want the shadow refusal", name, err)
		}
	}
	// shadow: false says nothing and is accepted.
	mustParse(t, "tenants: {acme: {overrides: {jobs: {shadow: false}}}}\n"+concurrencyHead+"    max_in_flight: 3\n")
}

func TestParse_concurrencyRefused(t *testing.T) {
	cases := map[string]struct{ top, fields, want string }{
		"no max_in_flight": {"", "    ttl: 10s\n", `limits[0] "jobs": max_in_flight: required on a concurrency limit (the most permits held at once, 1 to 10000)`},
		"max_in_flight 0":  {"", "    max_in_flight: 0\n", "max_in_flight: 0 must be in [1, 10000]"},
		"max_in_flight +1": {"", "    max_in_flight: 10001\n", "max_in_flight: 10001 must be in [1, 10000]"},
		"ttl short":        {"", "    max_in_flight: 5\n    ttl: 999ms\n", "ttl: 999ms must be in [1s, 24h0m0s]"},
		"ttl long":         {"", "    max_in_flight: 5\n    ttl: 24h0m0.001s\n", "ttl: 24h0m0.001s must be in [1s, 24h0m0s]"},
		"ttl word":         {"", "    max_in_flight: 5\n    ttl: soon\n", `ttl: "soon" is not a duration such as 30s`},
		"rate":             {"", "    max_in_flight: 5\n    rate: 5/s\n", "rate and burst: a concurrency limit bounds the permits held at once, not a rate; use max_in_flight"},
		"burst":            {"", "    max_in_flight: 5\n    burst: 5\n", "rate and burst: a concurrency limit bounds the permits held at once"},
		"lease":            {"", "    max_in_flight: 5\n    lease: {max: 5, ttl: 1s}\n", "lease: a concurrency limit cannot be leased (a permit is held and released at its owner); remove lease"},
		"leasable":         {"", "    max_in_flight: 5\n    leasable: true\n", "lease: a concurrency limit cannot be leased"},
		"fallback_rate":    {"", "    max_in_flight: 5\n    fallback_rate: 5/s\n", "fallback_rate and fallback_burst: a concurrency limit has no local fallback"},
		"fallback_burst":   {"", "    max_in_flight: 5\n    fallback_burst: 5\n", "use on_failure: closed or open"},
		"strict":           {"", "    max_in_flight: 5\n    consistency: strict\n", "consistency: a concurrency limit cannot be strict (its permits live in the owner's memory, written through to Redis); remove consistency or write fast"},
		"global":           {"", "    max_in_flight: 5\n    scope: global\n", "scope: a concurrency limit cannot be scope: global (its permits are counted in one region); remove scope or write region"},
		"local":            {"", "    max_in_flight: 5\n    on_failure: local\n", "on_failure: local cannot be used on a concurrency limit (one node alone cannot count the permits others hold, nor release them); use closed (the default for concurrency limits) or open"},
		"local, default":   {"defaults: {on_failure: local}\n", "    max_in_flight: 5\n    on_failure: local\n", "on_failure: local cannot be used on a concurrency limit"},
		"reserve_ttl":      {"", "    max_in_flight: 5\n    reserve_ttl: 5m\n", "reserve_ttl: a concurrency limit takes no reservations (a permit is released, not settled)"},
		"domain":           {"", "    max_in_flight: 5\n    domain: edge\n", "domain, values, unlimited and replaces: Envoy cannot release a permit, so a concurrency limit cannot answer Envoy RLS"},
		"unlimited":        {"", "    max_in_flight: 5\n    unlimited: true\n", "Envoy cannot release a permit"},
		"bad kind":         {"", "    max_in_flight: 5\n", `kind: "semaphore" is not rate or concurrency`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			yaml := tc.top + concurrencyHead + tc.fields
			if name == "bad kind" {
				yaml = strings.Replace(yaml, "kind: concurrency", "kind: semaphore", 1)
			}
			p, err := Parse("test.yaml", []byte(yaml))
			if p != nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestParse_rateKindRefusesConcurrencyFields(t *testing.T) {
	head := "limits:\n  - name: api\n    match: [tenant]\n    rate: 10/s\n    burst: 5\n"
	cases := map[string]struct{ fields, want string }{
		"max_in_flight":        {"    max_in_flight: 5\n", `limits[0] "api": max_in_flight: only a kind: concurrency limit bounds requests in flight; add kind: concurrency (instead of rate and burst), or remove max_in_flight`},
		"max_in_flight, kind":  {"    kind: rate\n    max_in_flight: 5\n", "max_in_flight: only a kind: concurrency limit"},
		"ttl":                  {"    ttl: 30s\n", "ttl: only a kind: concurrency limit has a permit ttl; add kind: concurrency, or remove ttl (a lease's ttl goes in lease: {max, ttl})"},
		"reserve_ttl strict":   {"    consistency: strict\n    reserve_ttl: 1m\n", "reserve_ttl: a strict limit takes no reservations (Redis decides it and cannot settle one yet); remove reserve_ttl, or make the limit fast"},
		"reserve_ttl domain":   {"    domain: edge\n    reserve_ttl: 1m\n", "reserve_ttl: a limit with a domain answers Envoy RLS, which never reserves"},
		"reserve_ttl short":    {"    reserve_ttl: 999ms\n", "reserve_ttl: 999ms must be in [1s, 24h0m0s]"},
		"reserve_ttl long":     {"    reserve_ttl: 25h\n", "reserve_ttl: 25h0m0s must be in [1s, 24h0m0s]"},
		"reserve_ttl word":     {"    reserve_ttl: later\n", `reserve_ttl: "later" is not a duration such as 5m`},
		"reserve_ttl negative": {"    reserve_ttl: -1s\n", "reserve_ttl: -1s must be in [1s, 24h0m0s]"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := Parse("test.yaml", []byte(head+tc.fields))
			if p != nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestParse_reserveTTL(t *testing.T) {
	cases := map[string]struct {
		fields string
		want   time.Duration
	}{
		"default": {"", time.Duration(decide.DefaultReserveTTL)},
		"min":     {"    reserve_ttl: 1s\n", time.Second},
		"max":     {"    reserve_ttl: 24h\n", 24 * time.Hour},
		"10m":     {"    reserve_ttl: 10m\n", 10 * time.Minute},
		"strict":  {"    consistency: strict\n", time.Duration(decide.DefaultReserveTTL)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := mustParse(t, "limits:\n  - name: api\n    match: [tenant]\n    rate: 10/s\n    burst: 5\n"+tc.fields)
			l := p.Limit("api")
			if l.Kind != KindRate || l.ReserveTTL != tc.want || l.Def().ReserveTTL != tc.want.Nanoseconds() || l.Def().Concurrency {
				t.Fatalf("kind %q, ReserveTTL %s, Def %+v; want rate, %s", l.Kind, l.ReserveTTL, l.Def(), tc.want)
			}
		})
	}
}

func TestParse_concurrencyAndStrictShareAGroup(t *testing.T) {
	_, err := Parse("test.yaml", []byte(`limits:
  - {name: jobs, kind: concurrency, match: [tenant, op], group: tenant, max_in_flight: 5}
  - {name: logins, match: [tenant], rate: 5/m, burst: 5, consistency: strict}
`))
	want := `limits: "jobs" (kind concurrency) and "logins" (consistency strict) share group "tenant": a request matching both would be decided by Redis, which holds no permits; make "logins" fast, or give them different groups`
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Parse error = %v, want one containing %q", err, want)
	}
	if strings.Contains(err.Error(), "(consistency fast)") {
		t.Errorf("the fast/strict message also names the concurrency limit: %v", err)
	}
	// Different groups are fine.
	mustParse(t, `limits:
  - {name: jobs, kind: concurrency, match: [tenant, op], group: op, max_in_flight: 5}
  - {name: logins, match: [tenant], rate: 5/m, burst: 5, consistency: strict}
`)
}

// tieredConcurrency has a concurrency limit with tiers and overrides.
const tieredConcurrency = `default_tier: free
tiers:
  free: {jobs: {max_in_flight: 2}}
  pro: {jobs: {max_in_flight: 50}}
tenants:
  acme: {tier: pro, overrides: {jobs: {max_in_flight: 200}}}
  beta: {tier: pro}
  gamma: {overrides: {jobs: {max_in_flight: 7}}}
limits:
  - {name: jobs, kind: concurrency, match: [tenant, op], group: tenant, max_in_flight: 20, ttl: 1m}
  - {name: api, match: [tenant], rate: 10/s, burst: 5}
`

func TestPolicy_concurrencyTiersAndOverrides(t *testing.T) {
	p := mustParse(t, tieredConcurrency)
	ttl := int64(time.Minute)
	cases := []struct {
		tenant string
		want   gcra.Limit
		shadow bool
	}{
		{"acme", gcra.Limit{Burst: 200, Interval: ttl}, false}, // pro, its own max_in_flight
		{"beta", gcra.Limit{Burst: 50, Interval: ttl}, false},  // pro
		{"gamma", gcra.Limit{Burst: 7, Interval: ttl}, false},  // the default tier, overridden
		{"nobody", gcra.Limit{Burst: 2, Interval: ttl}, false}, // the default tier
	}
	for _, tc := range cases {
		ms, err := p.Resolve(map[string]string{"tenant": tc.tenant, "op": "export"}, nil)
		if err != nil || len(ms) != 2 || ms[0].Limit.Name != "jobs" {
			t.Fatalf("%s: Resolve = %+v, %v", tc.tenant, ms, err)
		}
		if ms[0].Params != tc.want || ms[0].Shadow != tc.shadow {
			t.Errorf("%s: Params %+v shadow %v, want %+v %v", tc.tenant, ms[0].Params, ms[0].Shadow, tc.want, tc.shadow)
		}
		if got, shadow, ok := p.Tenant(tc.tenant, "jobs"); !ok || got != tc.want || shadow != tc.shadow {
			t.Errorf("%s: Tenant = %+v %v %v", tc.tenant, got, shadow, ok)
		}
		// What the owner's intake and the limiter read back from the key.
		l, set, how := p.KeyLimit(ms[0].Key)
		if l != ms[0].Limit || how != KeyExact || len(set) != 1 || set[0] != tc.want {
			t.Errorf("%s: KeyLimit(%q) = %v, %v, %v; want jobs, [%+v], exact", tc.tenant, ms[0].Key, l, set, how, tc.want)
		}
		if max, pttl := decide.PermitLimit(set[0]); max != tc.want.Burst || pttl != ttl {
			t.Errorf("%s: PermitLimit = %d, %d", tc.tenant, max, pttl)
		}
	}
	if got, _, ok := p.Tier("free", "jobs"); !ok || got != (gcra.Limit{Burst: 2, Interval: ttl}) {
		t.Errorf("Tier(free, jobs) = %+v, %v", got, ok)
	}
	if l := p.Limit("jobs"); l.MaxInFlight != 20 || l.Params != (gcra.Limit{Burst: 20, Interval: ttl}) {
		t.Errorf("the limit's own numbers changed: %+v", l)
	}
}

func TestPolicy_KeyLimit_concurrencyKeyWithoutTenant(t *testing.T) {
	p := mustParse(t, "tiers: {pro: {jobs: {max_in_flight: 9}}}\ntenants: {acme: {tier: pro}}\n"+
		"limits:\n  - {name: jobs, kind: concurrency, match: [team], max_in_flight: 3, ttl: 5s}\n  - {name: api, match: [tenant], rate: 1/s, burst: 1}\n")
	key := limitkey.Key("t1", "jobs", "t1")
	l, set, how := p.KeyLimit(key)
	want := []gcra.Limit{{Burst: 3, Interval: 5 * sec}, {Burst: 9, Interval: 5 * sec}}
	if l == nil || l.Name != "jobs" || how != KeyAmbiguous || !reflect.DeepEqual(set, want) {
		t.Fatalf("KeyLimit(%q) = %v, %v, %v; want jobs, %v, ambiguous", key, l, set, how, want)
	}
}

func TestParse_concurrencyAdjustRefused(t *testing.T) {
	limits := "limits:\n  - {name: jobs, kind: concurrency, match: [tenant], max_in_flight: 5}\n  - {name: api, match: [tenant, user], group: tenant, rate: 10/s, burst: 5}\n"
	cases := map[string]struct{ top, want string }{
		"tier rate":              {"tiers: {pro: {jobs: {rate: 5/s}}}\n", "tiers.pro.jobs: rate and burst: the limit is a concurrency limit, which has no rate; set max_in_flight"},
		"tier burst":             {"tiers: {pro: {jobs: {burst: 5}}}\n", "tiers.pro.jobs: rate and burst: the limit is a concurrency limit"},
		"override rate":          {"tenants: {acme: {overrides: {jobs: {rate: 5/s, burst: 2}}}}\n", "tenants.acme.overrides.jobs: rate and burst: the limit is a concurrency limit"},
		"tier max_in_flight 0":   {"tiers: {pro: {jobs: {max_in_flight: 0}}}\n", "tiers.pro.jobs: max_in_flight: 0 must be in [1, 10000]"},
		"override max 10001":     {"tenants: {acme: {overrides: {jobs: {max_in_flight: 10001}}}}\n", "tenants.acme.overrides.jobs: max_in_flight: 10001 must be in [1, 10000]"},
		"tier max on rate":       {"tiers: {pro: {api: {max_in_flight: 3}}}\n", "tiers.pro.api: max_in_flight: the limit is a rate limit, which counts no requests in flight; set rate or burst"},
		"override max on rate":   {"tenants: {acme: {overrides: {api: {max_in_flight: 3, burst: 2}}}}\n", "tenants.acme.overrides.api: max_in_flight: the limit is a rate limit"},
		"tier ttl (not a field)": {"tiers: {pro: {jobs: {ttl: 5s}}}\n", "field ttl not found in a tier or override entry"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := Parse("test.yaml", []byte(tc.top+limits))
			if p != nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestLimit_Def_concurrency(t *testing.T) {
	p := mustParse(t, tieredConcurrency)
	got := *p.Limit("jobs").Def()
	want := decide.Def{Name: "jobs", Concurrency: true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("jobs Def = %+v, want %+v", got, want)
	}
	got = *p.Limit("api").Def()
	want = decide.Def{Name: "api", ReserveTTL: decide.DefaultReserveTTL}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("api Def = %+v, want %+v", got, want)
	}
	if p.Limit("jobs").Def() != p.Limit("jobs").Def() {
		t.Error("a compiled limit's Def is not shared")
	}
	// A literal Limit (not built by a policy) gets the same fields.
	lit := &Limit{Name: "x", Kind: KindConcurrency}
	if d := lit.Def(); !d.Concurrency || d.ReserveTTL != 0 {
		t.Errorf("literal Def = %+v", d)
	}
}

func TestCheckPermitParams(t *testing.T) {
	cases := []struct {
		l  gcra.Limit
		ok bool
	}{
		{gcra.Limit{Burst: 1, Interval: sec}, true},
		{gcra.Limit{Burst: 10000, Interval: int64(24 * time.Hour)}, true}, // far beyond MaxSpan, still a permit bound
		{gcra.Limit{Burst: 0, Interval: sec}, false},
		{gcra.Limit{Burst: 10001, Interval: sec}, false},
		{gcra.Limit{Burst: 1, Interval: sec - 1}, false},
		{gcra.Limit{Burst: 1, Interval: int64(24*time.Hour) + 1}, false},
		{gcra.Limit{Burst: -1, Interval: -1}, false},
	}
	for _, tc := range cases {
		err := CheckPermitParams(tc.l)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("CheckPermitParams(%+v) = %v, want ok=%v", tc.l, err, tc.ok)
		}
	}
}

// TestLoadFile_concurrency reads testdata/concurrency.yaml whole: every
// compiled field of its limits, and for every tenant the round trip from
// Resolve's match to the key's limit and numbers (KeyLimit) and Def.
func TestLoadFile_concurrency(t *testing.T) {
	p, err := LoadFile("testdata/concurrency.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fiveM := 5 * time.Minute
	want := []*Limit{{
		Name: "exports", Match: []string{"tenant", "op"}, Group: "tenant", Kind: KindConcurrency,
		MaxInFlight: 20, TTL: 2 * time.Minute, Params: gcra.Limit{Burst: 20, Interval: int64(2 * time.Minute)},
		Consistency: ConsistencyFast, OnFailure: FailClosed, Scope: ScopeRegion,
	}, {
		Name: "uploads", Match: []string{"tenant", "route"}, Group: "tenant", Kind: KindConcurrency,
		MaxInFlight: 5, TTL: 30 * time.Second, Params: gcra.Limit{Burst: 5, Interval: 30 * sec},
		Consistency: ConsistencyFast, OnFailure: FailOpen, Scope: ScopeRegion,
	}, {
		Name: "tokens", Match: []string{"tenant"}, Group: "tenant", Kind: KindRate, ReserveTTL: 10 * time.Minute,
		Rate: Rate{100000, time.Minute}, Burst: 20000, Params: gcra.Limit{Interval: 600_000, Burst: 20000},
		Consistency: ConsistencyFast, OnFailure: FailLocal, SharedFallback: true, Scope: ScopeRegion,
	}, {
		Name: "per-user", Match: []string{"tenant", "user"}, Group: "tenant", Kind: KindRate, ReserveTTL: fiveM,
		Rate: Rate{10, time.Second}, Burst: 5, Params: gcra.Limit{Interval: 100_000_000, Burst: 5},
		Consistency: ConsistencyFast, OnFailure: FailLocal, SharedFallback: true, Scope: ScopeRegion,
	}}
	if len(p.Limits) != len(want) {
		t.Fatalf("got %d limits, want %d", len(p.Limits), len(want))
	}
	for i, l := range p.Limits {
		w := want[i]
		w.match, w.groupPos = l.match, l.groupPos // internal
		w.def = newDef(w)
		if !reflect.DeepEqual(l, w) {
			t.Errorf("limits[%d] =\n%+v\nwant\n%+v", i, l, w)
		}
	}
	exports := map[string]int64{"acme": 200, "tiny": 2, "other": 20}
	for tenant, n := range exports {
		desc := map[string]string{"tenant": tenant, "op": "export", "route": "up", "user": "u"}
		ms, err := p.Resolve(desc, nil)
		if err != nil || len(ms) != 4 {
			t.Fatalf("%s: Resolve = %v, %v", tenant, ms, err)
		}
		if got := ms[0].Params; got != (gcra.Limit{Burst: n, Interval: int64(2 * time.Minute)}) {
			t.Errorf("%s: exports Params = %+v, want max_in_flight %d", tenant, got, n)
		}
		for _, m := range ms {
			l, set, how := p.KeyLimit(m.Key)
			if l != m.Limit || how != KeyExact || len(set) != 1 || set[0] != m.Params {
				t.Errorf("%s: KeyLimit(%q) = %v, %v, %v; Resolve gave %s %+v", tenant, m.Key, l, set, how, m.Limit.Name, m.Params)
			}
			check := CheckParams
			if l.Def().Concurrency {
				check = CheckPermitParams
			}
			if err := check(m.Params); err != nil {
				t.Errorf("%s: %s: %v", tenant, m.Key, err)
			}
		}
	}
	if !p.Limit("exports").Def().Concurrency || p.Limit("tokens").Def().ReserveTTL != int64(10*time.Minute) {
		t.Errorf("Defs: exports %+v, tokens %+v", p.Limit("exports").Def(), p.Limit("tokens").Def())
	}
}
