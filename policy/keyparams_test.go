package policy

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/gcra"
)

const keyPolicy = `
tiers:
  pro: {per-user: {rate: 50/s, burst: 20}, per-route: {burst: 99}}
tenants:
  acme: {tier: pro}
  "a:b": {overrides: {per-user: {rate: 10/s}}}
limits:
  - {name: per-user, match: [tenant, user], rate: 5/s, burst: 3}
  - {name: per-route, match: [route], rate: 20/s, burst: 10}
  - {name: per-ip, match: [ip], rate: 1/s, burst: 1}
`

// The owner recognises the limit and the tenant from the key Resolve built
// and finds the numbers Resolve gave it.
func TestPolicy_ParamsForKey(t *testing.T) {
	p, err := Parse("test.yaml", []byte(keyPolicy))
	if err != nil {
		t.Fatal(err)
	}
	for _, desc := range []map[string]string{
		{"tenant": "acme", "user": "u1"},
		{"tenant": "a:b", "user": "u%{}"},
		{"tenant": "other", "user": "u1"},
		{"ip": "10.0.0.1"},
	} {
		ms, err := p.Resolve(desc, nil)
		if err != nil || len(ms) != 1 {
			t.Fatalf("Resolve(%v) = %v, %v", desc, ms, err)
		}
		got, how := p.ParamsForKey(ms[0].Key)
		if how != KeyExact || len(got) != 1 || got[0] != ms[0].Params {
			t.Errorf("ParamsForKey(%q) = %v, %v; want exactly %v", ms[0].Key, got, how, ms[0].Params)
		}
	}
	// per-route's key has no tenant, and the pro tier changes its burst.
	got, how := p.ParamsForKey("weir:{r1}:per-route:r1")
	want := []gcra.Limit{{Interval: 50_000_000, Burst: 10}, {Interval: 50_000_000, Burst: 99}}
	if how != KeyAmbiguous || !slices.Equal(got, want) {
		t.Errorf("per-route: %v, %v; want ambiguous %v", got, how, want)
	}
	for _, key := range []string{
		"", "weir:", "weir:{acme}", "weir:{acme}:nope:acme", "weir:{acme}:per-user:acme",
		"weir:{acme}:per-user:acme:u1:extra", "other:{acme}:per-user:acme:u1",
	} {
		if got, how := p.ParamsForKey(key); how != KeyUnknown || got != nil {
			t.Errorf("ParamsForKey(%q) = %v, %v; want unknown", key, got, how)
		}
	}
}

func TestCheckParams(t *testing.T) {
	for _, tc := range []struct {
		l  gcra.Limit
		ok bool
	}{
		{gcra.Limit{Interval: MinInterval, Burst: 1}, true},
		{gcra.Limit{Interval: MinInterval - 1, Burst: 1}, false}, // faster than 1e6/s
		{gcra.Limit{Interval: MaxInterval, Burst: 50}, true},     // 1/d burst 50: exactly MaxSpan
		{gcra.Limit{Interval: MaxInterval, Burst: 51}, false},    // span above MaxSpan
		{gcra.Limit{Interval: 0, Burst: 1}, false},
		{gcra.Limit{Interval: -5, Burst: 1}, false},
		{gcra.Limit{Interval: MaxInterval + 1, Burst: 1}, false},
		{gcra.Limit{Interval: 1 << 50, Burst: 1}, false},
		{gcra.Limit{Interval: int64(time.Hour), Burst: 1}, true},           // 1/h
		{gcra.Limit{Interval: int64(time.Hour), Burst: 10_000_000}, false}, // 1/h burst 1e7: 1,141 years
		{gcra.Limit{Interval: 1 << 46, Burst: 1}, true},                    // ~19.5 h
		{gcra.Limit{Interval: MinInterval, Burst: 0}, false},
		{gcra.Limit{Interval: MaxInterval, Burst: 1 << 40}, false},
	} {
		err := CheckParams(tc.l)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("CheckParams(%+v) = %v, want ok=%v", tc.l, err, tc.ok)
		}
	}
	// Every limit a policy accepts passes.
	p := Builtin()
	for _, l := range p.Limits {
		if err := CheckParams(l.Params); err != nil {
			t.Errorf("%s: %v", l.Name, err)
		}
	}
}

// FuzzParamsForKey parses arbitrary policies and resolves requests with
// arbitrary values: the owner must recognise every key Resolve builds and
// find the numbers Resolve gave it, and those are within CheckParams.
func FuzzParamsForKey(f *testing.F) {
	f.Add([]byte(keyPolicy), "acme", "u1")
	f.Add([]byte(keyPolicy), "a:b", "%{}")
	f.Add(BuiltinYAML(), "acme", "x%3A")
	if data, err := os.ReadFile("testdata/concurrency.yaml"); err == nil {
		f.Add(data, "acme", "v")
	}
	f.Fuzz(func(t *testing.T, data []byte, tenant, value string) {
		p, err := Parse("fuzz.yaml", data)
		if err != nil || tenant == "" || value == "" {
			return
		}
		desc := map[string]string{}
		for _, d := range p.Descriptors() {
			desc[d] = value
		}
		desc[p.TenantDescriptor] = tenant
		if p.tenantIdx < 0 {
			delete(desc, p.TenantDescriptor)
		}
		ms, err := p.Resolve(desc, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			check := CheckParams
			if m.Limit.Kind == KindConcurrency {
				check = CheckPermitParams // a permit bound, not a rate
			}
			if err := check(m.Params); err != nil {
				t.Fatalf("%s: %v", m.Key, err)
			}
			got, how := p.ParamsForKey(m.Key)
			switch {
			case how == KeyExact && got[0] == m.Params:
			case how == KeyAmbiguous && slices.Contains(got, m.Params):
			default:
				t.Fatalf("ParamsForKey(%q) = %v, %v; Resolve gave %v", m.Key, got, how, m.Params)
			}
		}
	})
}

// TestParse_refusesSpansBeyondMaxSpan: "1/h burst 1e7" once loaded and
// reported a negative window (its span overflowed a Duration); it must be
// refused at load, as must a fallback with the same numbers.
func TestParse_refusesSpansBeyondMaxSpan(t *testing.T) {
	for _, doc := range []string{
		"limits:\n  - {name: a, match: [tenant], rate: 1/h, burst: 10000000}\n",
		"limits:\n  - {name: a, match: [tenant], rate: 1/d, burst: 51}\n",
		"limits:\n  - {name: a, match: [tenant], rate: 1/s, burst: 1, on_failure: local, fallback_rate: 1/h, fallback_burst: 10000000}\n",
	} {
		_, err := Parse("p.yaml", []byte("version: \"1\"\n"+doc))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "exceeds") {
			t.Errorf("%s: got %v, want the span refused", doc, err)
		}
	}
	if _, err := Parse("p.yaml", []byte("version: \"1\"\nlimits:\n  - {name: a, match: [tenant], rate: 1/d, burst: 50}\n")); err != nil {
		t.Errorf("1/d burst 50 (exactly MaxSpan) refused: %v", err)
	}
}
