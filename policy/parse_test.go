package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/gcra"
	"github.com/weirhq/weir/lease"
)

func mustParse(t testing.TB, yaml string) *Policy {
	t.Helper()
	p, err := Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return p
}

func TestLoadFile_full(t *testing.T) {
	p, err := LoadFile("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p.Version != "2026-11-29.1" || p.Source != "testdata/full.yaml" {
		t.Errorf("version, source = %q, %q", p.Version, p.Source)
	}
	if p.UnknownDescriptors != UnknownReject || p.TenantDescriptor != "tenant" || p.DefaultTier != "free" {
		t.Errorf("settings = %q %q %q", p.UnknownDescriptors, p.TenantDescriptor, p.DefaultTier)
	}
	want := []*Limit{{
		Name: "per-user", Match: []string{"tenant", "user"}, Group: "tenant",
		Rate: Rate{5, time.Second}, Burst: 3, Params: gcra.Limit{Interval: 200_000_000, Burst: 3},
		Consistency: ConsistencyStrict, OnFailure: FailLocal, Fallback: gcra.Limit{Interval: 40_000_000, Burst: 25},
		Scope: ScopeRegion, Kind: KindRate, ReserveTTL: 5 * time.Minute,
	}, {
		Name: "per-tenant", Match: []string{"tenant"}, Group: "tenant",
		Rate: Rate{100, time.Second}, Burst: 50, Params: gcra.Limit{Interval: 10_000_000, Burst: 50},
		Consistency: ConsistencyStrict, OnFailure: FailClosed, Scope: ScopeGlobal, Kind: KindRate, ReserveTTL: 5 * time.Minute,
	}, {
		Name: "audit", Match: []string{"route", "tenant"}, Group: "route",
		Rate: Rate{600, time.Minute}, Burst: 5, Params: gcra.Limit{Interval: 100_000_000, Burst: 5},
		Consistency: ConsistencyFast, OnFailure: FailOpen, Scope: ScopeRegion,
		Lease: &lease.Terms{Max: 20, TTL: 250 * time.Millisecond}, Kind: KindRate, ReserveTTL: 5 * time.Minute,
	}}
	if len(p.Limits) != len(want) {
		t.Fatalf("got %d limits, want %d", len(p.Limits), len(want))
	}
	for i, l := range p.Limits {
		w := want[i]
		w.match, w.groupPos = l.match, l.groupPos // internal
		w.def = newDef(w)                         // the compiled identity, by value
		if !reflect.DeepEqual(l, w) {
			t.Errorf("limits[%d] =\n%+v\nwant\n%+v", i, l, w)
		}
	}
	if got := p.Descriptors(); !reflect.DeepEqual(got, []string{"route", "tenant", "user"}) {
		t.Errorf("Descriptors() = %q", got)
	}
	if p.Limit("audit") != p.Limits[2] || p.Limit("nope") != nil {
		t.Error("Limit lookup is wrong")
	}
}

func TestParse_versionDefaultsToDigest(t *testing.T) {
	src := "limits: [{name: a, match: [x], rate: 1/s, burst: 1}]\n"
	sum := sha256.Sum256([]byte(src))
	p := mustParse(t, src)
	if want := "sha256:" + hex.EncodeToString(sum[:])[:12]; p.Version != want {
		t.Errorf("Version = %q, want %q", p.Version, want)
	}
	// YAML would read these as a date and a float; the version is the text.
	for _, v := range []string{"2026-11-29", "1.10"} {
		if p := mustParse(t, "version: "+v+"\n"+src); p.Version != v {
			t.Errorf("version %s read as %q", v, p.Version)
		}
	}
}

func TestParse_defaultsApply(t *testing.T) {
	p := mustParse(t, `
defaults: {consistency: strict, on_failure: closed, scope: global}
limits:
  - {name: a, match: [x], rate: 1/s, burst: 1}
  - {name: b, match: [y], rate: 1/s, burst: 1, consistency: fast, on_failure: open, scope: region}
`)
	a, b := p.Limits[0], p.Limits[1]
	if a.Consistency != ConsistencyStrict || a.OnFailure != FailClosed || a.Scope != ScopeGlobal {
		t.Errorf("defaults not applied: %+v", a)
	}
	if b.Consistency != ConsistencyFast || b.OnFailure != FailOpen || b.Scope != ScopeRegion {
		t.Errorf("limit's own settings lost: %+v", b)
	}
	if p.UnknownDescriptors != UnknownReject || p.TenantDescriptor != "tenant" {
		t.Errorf("top-level defaults = %q, %q", p.UnknownDescriptors, p.TenantDescriptor)
	}
}

// TestParse_invalid lists every validation rule with the message it gives.
func TestParse_invalid(t *testing.T) {
	const ok = "{name: ok, match: [tenant], rate: 1/s, burst: 1}"
	long := strings.Repeat("d", 257)
	for _, tc := range []struct {
		name, yaml string
		want       []string // substrings of the message
	}{
		{"empty file", "", []string{"test.yaml: the file is empty"}},
		{"comments only", "# nothing\n", []string{"the file is empty"}},
		{"no limits", "version: v1\n", []string{"test.yaml: limits: at least one limit is required"}},
		{"null document", "~\n", []string{"limits: at least one limit is required"}},
		{"two documents", "limits: [" + ok + "]\n---\nlimits: [" + ok + "]\n", []string{"more than one YAML document"}},
		{"syntax", "limits: [\n", []string{"test.yaml: ", "line"}},
		{"unknown top field", "limitz: []\n", []string{"test.yaml: line 1: field limitz not found"}},
		{"unknown limit field", "limits:\n  - {name: a, match: [x], rate: 1/s, burst: 1, bursts: 2}\n", []string{"line 2: field bursts not found"}},
		{"unknown tier field", "tiers: {pro: {ok: {rate: 1/s, ceiling: 3}}}\nlimits: [" + ok + "]\n", []string{"field ceiling not found"}},
		{"tier sets match", "tiers: {pro: {ok: {match: [a]}}}\nlimits: [" + ok + "]\n", []string{"field match not found"}},
		{"wrong type", "limits: [{name: a, match: [x], rate: 1/s, burst: many}]\n", []string{"cannot unmarshal", "many"}},
		{"duplicate key", "limits: [" + ok + "]\nlimits: [" + ok + "]\n", []string{"already defined"}},
		{"bad rate", "limits: [" + ok + ", " + ok + ", {name: per-user, match: [t], rate: 5/x, burst: 1}]\n",
			[]string{`test.yaml: limits[2] "per-user": rate: "5/x" is not N/s, N/m, N/h or N/d`}},
		{"bare number rate", "limits: [{name: a, match: [x], rate: 5, burst: 1}]\n", []string{`limits[0] "a": rate: "5" is not N/s`}},
		{"zero rate", "limits: [{name: a, match: [x], rate: 0/s, burst: 1}]\n", []string{`rate: "0/s": N must be positive`}},
		{"missing rate", "limits: [{name: a, match: [x], burst: 1}]\n", []string{`limits[0] "a": rate: required`}},
		{"zero burst", "limits: [{name: a, match: [x], rate: 1/s}]\n", []string{`limits[0] "a": burst: must be at least 1, got 0`}},
		{"negative burst", "limits: [{name: a, match: [x], rate: 1/s, burst: -2}]\n", []string{`burst: must be at least 1, got -2`}},
		{"span overflow", "limits: [{name: a, match: [x], rate: 1/h, burst: 1000000000}]\n", []string{`limits[0] "a": rate 1/h with burst 1000000000: gcra: invalid limit`}},
		{"missing name", "limits: [{match: [x], rate: 1/s, burst: 1}]\n", []string{`limits[0]: name: "" must match [A-Za-z0-9_.-]{1,64}`}},
		{"bad name", "limits: [{name: 'a:b', match: [x], rate: 1/s, burst: 1}]\n", []string{`name: "a:b" must match`}},
		{"long name", "limits: [{name: " + strings.Repeat("n", 65) + ", match: [x], rate: 1/s, burst: 1}]\n", []string{"must match [A-Za-z0-9_.-]{1,64}"}},
		{"duplicate name", "limits: [" + ok + ", " + ok + "]\n", []string{`limits[1] "ok": name: "ok" is already used`}},
		{"no match", "limits: [{name: a, rate: 1/s, burst: 1}]\n", []string{`limits[0] "a": match: must list at least one descriptor`}},
		{"empty descriptor", "limits: [{name: a, match: [x, ''], rate: 1/s, burst: 1}]\n", []string{"match[1]: descriptor name is empty"}},
		{"long descriptor", "limits: [{name: a, match: [" + long + "], rate: 1/s, burst: 1}]\n", []string{"match[0]: descriptor name is longer than 256 bytes"}},
		{"duplicate descriptor", "limits: [{name: a, match: [x, y, x], rate: 1/s, burst: 1}]\n", []string{`match[2]: "x" is listed twice`}},
		{"too many descriptors", "limits: [{name: a, match: [" + manyNames(33) + "], rate: 1/s, burst: 1}]\n", []string{"match: more than 32 descriptors"}},
		{"group not in match", "limits: [{name: a, match: [x], group: y, rate: 1/s, burst: 1}]\n", []string{`limits[0] "a": group: "y" is not in match`}},
		{"bad consistency", "limits: [{name: a, match: [x], rate: 1/s, burst: 1, consistency: eventual}]\n", []string{`limits[0] "a": consistency: "eventual" is not fast or strict`}},
		{"bad on_failure", "limits: [{name: a, match: [x], rate: 1/s, burst: 1, on_failure: maybe}]\n", []string{`on_failure: "maybe" is not open, closed or local`}},
		{"bad scope", "limits: [{name: a, match: [x], rate: 1/s, burst: 1, scope: planet}]\n", []string{`scope: "planet" is not region or global`}},
		{"bad default", "defaults: {on_failure: sometimes}\nlimits: [" + ok + "]\n", []string{`defaults.on_failure: "sometimes" is not open, closed or local`}},
		{"bad unknown_descriptors", "unknown_descriptors: allow\nlimits: [" + ok + "]\n", []string{`unknown_descriptors: "allow" is not reject or ignore`}},
		{"fallback burst without rate", "limits: [{name: a, match: [x], rate: 1/s, burst: 1, on_failure: local, fallback_burst: 3}]\n", []string{`limits[0] "a": fallback_burst: needs fallback_rate`}},
		{"fast and strict share a group", "limits: [{name: f, match: [t, u], group: t, rate: 1/m, burst: 5}, {name: s, match: [t], rate: 1/s, burst: 1, consistency: strict}]\n", []string{`limits: "f" (consistency fast) and "s" (consistency strict) share group "t"`}},
		{"strict default and a fast limit share a group", "defaults: {consistency: strict}\nlimits: [{name: s, match: [t], rate: 1/s, burst: 1}, {name: f, match: [u, t], group: t, rate: 1/m, burst: 5, consistency: fast}]\n", []string{`"f" (consistency fast) and "s" (consistency strict) share group "t"`}},
		{"local without fallback burst", "limits: [{name: a, match: [x], rate: 1/s, burst: 1, on_failure: local, fallback_rate: 2/s}]\n", []string{"fallback_burst: must be at least 1, got 0"}},
		{"local bad fallback rate", "limits: [{name: a, match: [x], rate: 1/s, burst: 1, on_failure: local, fallback_rate: 2/w, fallback_burst: 1}]\n", []string{`fallback_rate: "2/w" is not N/s`}},
		{"fallback without local", "limits: [{name: a, match: [x], rate: 1/s, burst: 1, on_failure: open, fallback_rate: 2/s, fallback_burst: 2}]\n", []string{"fallback_rate and fallback_burst: only allowed when on_failure is local, not open"}},
		{"fallback burst without local", "limits: [{name: a, match: [x], rate: 1/s, burst: 1, on_failure: closed, fallback_burst: 2}]\n", []string{"only allowed when on_failure is local, not closed"}},
		{"long version", "version: " + strings.Repeat("v", 129) + "\nlimits: [" + ok + "]\n", []string{"version: must be valid UTF-8 of at most 128 bytes"}},
		{"long tenant_descriptor", "tenant_descriptor: " + long + "\nlimits: [" + ok + "]\n", []string{"tenant_descriptor: longer than 256 bytes"}},
		{"unknown default tier", "default_tier: gold\nlimits: [" + ok + "]\n", []string{`test.yaml: default_tier: tier "gold" is not defined`}},
		{"unknown tenant tier", "tiers: {pro: {}}\ntenants: {acme: {tier: gold}}\nlimits: [" + ok + "]\n", []string{`tenants.acme: tier: tier "gold" is not defined`}},
		{"tier names unknown limit", "tiers: {pro: {per-usr: {rate: 1/s}}}\nlimits: [" + ok + "]\n", []string{`tiers.pro.per-usr: no limit is named "per-usr"`}},
		{"override names unknown limit", "tenants: {acme: {overrides: {nope: {burst: 2}}}}\nlimits: [" + ok + "]\n", []string{`tenants.acme.overrides.nope: no limit is named "nope"`}},
		{"tier bad rate", "tiers: {pro: {ok: {rate: fast}}}\nlimits: [" + ok + "]\n", []string{`tiers.pro.ok: rate: "fast" is not N/s`}},
		{"tier bad burst", "tiers: {pro: {ok: {burst: 0}}}\nlimits: [" + ok + "]\n", []string{"tiers.pro.ok: burst: must be at least 1, got 0"}},
		{"override bad combination", "tenants: {acme: {overrides: {ok: {rate: 1/h, burst: 1000000000}}}}\nlimits: [" + ok + "]\n", []string{"tenants.acme.overrides.ok: rate 1/h with burst 1000000000: gcra: invalid limit"}},
		{"empty tenant name", "tenants: {'': {}}\nlimits: [" + ok + "]\n", []string{"tenants: a tenant name is empty"}},
		{"tenant descriptor unused", "tenant_descriptor: org\ntenants: {acme: {}}\nlimits: [" + ok + "]\n", []string{`tenant_descriptor: "org" is in no limit's match`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse("test.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", p)
			}
			if p != nil {
				t.Error("Parse returned a policy with its error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\ndoes not contain\n%s", err, w)
				}
			}
			if strings.Contains(err.Error(), "policy.file") {
				t.Errorf("error leaks a Go type name: %v", err)
			}
		})
	}
}

func manyNames(n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = "d" + strings.Repeat("x", i)
	}
	return strings.Join(names, ", ")
}

func TestParse_reportsEveryProblem(t *testing.T) {
	_, err := Parse("p.yaml", []byte(`
limits:
  - {name: a, match: [x], rate: 5/x, burst: 0}
  - {name: b, match: [x], group: y, rate: 1/s, burst: 1}
`))
	want := `p.yaml: limits[0] "a": rate: "5/x" is not N/s, N/m, N/h or N/d
p.yaml: limits[0] "a": burst: must be at least 1, got 0
p.yaml: limits[1] "b": group: "y" is not in match`
	if err == nil || err.Error() != want {
		t.Errorf("error =\n%v\nwant\n%s", err, want)
	}
	var b strings.Builder
	b.WriteString("limits:\n")
	for range 30 {
		b.WriteString("  - {name: '', match: [x], rate: 1/s, burst: 1}\n")
	}
	_, err = Parse("p.yaml", []byte(b.String()))
	if lines := strings.Count(err.Error(), "\n") + 1; lines != maxErrors+1 || !strings.HasSuffix(err.Error(), "and 10 more problems") {
		t.Errorf("%d lines, ending %q", lines, err.Error()[len(err.Error())-30:])
	}
}

func TestParse_tooLarge(t *testing.T) {
	_, err := Parse("big.yaml", make([]byte, MaxFileBytes+1))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "big.yaml: larger than") {
		t.Errorf("error = %v", err)
	}
}

func TestLoadFile_missing(t *testing.T) {
	_, err := LoadFile(filepath.Join(t.TempDir(), "none.yaml"))
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "none.yaml") {
		t.Errorf("error = %v", err)
	}
}

func TestBuiltin(t *testing.T) {
	p := Builtin()
	if p.Version != "builtin.1" || p.Source != "builtin.yaml" {
		t.Errorf("version, source = %q, %q", p.Version, p.Source)
	}
	u := p.Limit("per-user")
	if u == nil || u.Params != (gcra.Limit{Interval: 200_000_000, Burst: 3}) || u.Group != "tenant" ||
		!reflect.DeepEqual(u.Match, []string{"tenant", "user"}) {
		t.Errorf("per-user = %+v", u)
	}
	if tl := p.Limit("per-tenant"); tl == nil || tl.Params != (gcra.Limit{Interval: 10_000_000, Burst: 50}) {
		t.Errorf("per-tenant = %+v", tl)
	}
	shadows := 0
	for _, l := range p.Limits {
		if l.Shadow {
			shadows++
		}
	}
	if shadows == 0 {
		t.Error("the builtin policy has no shadow example")
	}
	y := BuiltinYAML()
	y[0] = 'X' // the caller's copy
	if again, err := Parse("builtin.yaml", BuiltinYAML()); err != nil || again.Version != p.Version {
		t.Errorf("BuiltinYAML is not the builtin policy: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(BuiltinYAML())
	for _, name := range []string{"testdata/full.yaml", "testdata/concurrency.yaml"} {
		if data, err := os.ReadFile(name); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("limits: [{name: a, match: [x, y], group: y, rate: 1/s, burst: 1}]\nunknown_descriptors: ignore\n"))
	f.Add([]byte("tenants: {a: {tier: b}}\ntiers: {b: {x: {burst: 2}}}\nlimits: [{name: x, match: [tenant], rate: 9/h, burst: 9}]"))
	f.Add([]byte("&a [*a]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("fuzz.yaml", data)
		if err != nil {
			if p != nil || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v with policy %v, or not ErrInvalid", err, p)
			}
			return
		}
		for _, l := range p.Limits {
			if err := l.Params.Validate(); err != nil {
				t.Fatalf("accepted limit %q with invalid params: %v", l.Name, err)
			}
		}
		desc := map[string]string{}
		for _, d := range p.Descriptors() {
			desc[d] = "v:{%}"
		}
		ms, err := p.Resolve(desc, nil)
		if err != nil || len(ms) != len(p.Limits) {
			t.Fatalf("Resolve with every descriptor: %d matches of %d, %v", len(ms), len(p.Limits), err)
		}
		for _, m := range ms {
			if m.Params.Validate() != nil {
				t.Fatalf("match %q has invalid params %+v", m.Key, m.Params)
			}
		}
	})
}
