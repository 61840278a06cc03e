package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/weirhq/weir/gcra"
)

func TestParse_failureDefaultsToTheNodesShare(t *testing.T) {
	p := mustParse(t, `
limits:
  - {name: implicit, match: [tenant], rate: 10/s, burst: 5}
  - {name: explicit, match: [tenant, user], group: tenant, rate: 10/s, burst: 5, on_failure: local}
  - {name: given, match: [tenant, ip], group: tenant, rate: 10/s, burst: 5, on_failure: local, fallback_rate: 1/s, fallback_burst: 2}
  - {name: written-open, match: [tenant, route], group: tenant, rate: 10/s, burst: 5, on_failure: open}
`)
	for _, name := range []string{"implicit", "explicit"} {
		if l := p.Limit(name); l.OnFailure != FailLocal || !l.SharedFallback || l.Fallback != (gcra.Limit{}) {
			t.Errorf("%s: on_failure %s, shared %v, fallback %+v; want local with the derived share", name, l.OnFailure, l.SharedFallback, l.Fallback)
		}
	}
	if l := p.Limit("given"); l.SharedFallback || l.Fallback != (gcra.Limit{Interval: 1_000_000_000, Burst: 2}) {
		t.Errorf("given: shared %v, fallback %+v", l.SharedFallback, l.Fallback)
	}
	if l := p.Limit("written-open"); l.OnFailure != FailOpen || l.SharedFallback {
		t.Errorf("written-open: %s shared %v", l.OnFailure, l.SharedFallback)
	}
	ms, err := p.Resolve(map[string]string{"tenant": "t", "ip": "1"}, nil)
	if err != nil || len(ms) != 2 {
		t.Fatalf("Resolve = %v, %v", ms, err)
	}
	if got, want := ms[0].FallbackLimit(3), (gcra.Limit{Interval: 300_000_000, Burst: 2}); got != want {
		t.Errorf("implicit share of 3 nodes = %+v, want %+v", got, want)
	}
	if got, want := ms[1].FallbackLimit(3), (gcra.Limit{Interval: 1_000_000_000, Burst: 2}); got != want {
		t.Errorf("given fallback = %+v, want %+v (members must not change it)", got, want)
	}
}

func TestSharedLimit(t *testing.T) {
	l := gcra.Limit{Interval: 10_000_000, Burst: 5}
	for _, c := range []struct {
		members int
		want    gcra.Limit
	}{
		{-1, l},
		{0, l},
		{1, l},
		{2, gcra.Limit{Interval: 20_000_000, Burst: 3}},   // burst 5/2 rounds up
		{5, gcra.Limit{Interval: 50_000_000, Burst: 1}},   // exact
		{7, gcra.Limit{Interval: 70_000_000, Burst: 1}},   // never below one unit
		{10, gcra.Limit{Interval: 100_000_000, Burst: 1}}, // more nodes than burst
	} {
		if got := SharedLimit(l, c.members); got != c.want {
			t.Errorf("SharedLimit(%+v, %d) = %+v, want %+v", l, c.members, got, c.want)
		}
	}
	huge := gcra.Limit{Interval: gcra.MaxSpan / 4, Burst: 4}
	if got := SharedLimit(huge, 3); got.Validate() != nil || got.Burst != 2 {
		t.Errorf("SharedLimit of a near-maximal span = %+v: %v", got, got.Validate())
	}
}

func TestParse_fastAndStrictOnDifferentGroupsLoad(t *testing.T) {
	p := mustParse(t, `
limits:
  - {name: per-user, match: [tenant, user], group: tenant, rate: 1/m, burst: 5}
  - {name: account, match: [org, account], group: org, rate: 1/s, burst: 1, consistency: strict}
`)
	if len(p.Limits) != 2 {
		t.Fatalf("limits = %d", len(p.Limits))
	}
}

// TestParse_globalLimitMustNotFailOpen: on_failure: open on a scope: global
// limit, written or inherited from defaults, is refused; local and closed
// load, and so does open on a regional limit.
func TestParse_globalLimitMustNotFailOpen(t *testing.T) {
	for name, doc := range map[string]string{
		"written":   "limits:\n  - {name: g, match: [tenant], rate: 10/s, burst: 5, scope: global, on_failure: open}\n",
		"inherited": "defaults: {on_failure: open, scope: global}\nlimits:\n  - {name: g, match: [tenant], rate: 10/s, burst: 5}\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("test.yaml", []byte(doc))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `limits[0] "g": on_failure: open cannot be used on a scope: global limit`) {
				t.Fatalf("Parse error = %v, want open on a global limit refused", err)
			}
		})
	}
	p := mustParse(t, `
limits:
  - {name: local, match: [tenant], rate: 10/s, burst: 5, scope: global}
  - {name: closed, match: [tenant, user], group: tenant, rate: 10/s, burst: 5, scope: global, on_failure: closed}
  - {name: regional, match: [tenant, ip], group: tenant, rate: 10/s, burst: 5, on_failure: open}
`)
	if p.Limit("local").OnFailure != FailLocal || p.Limit("regional").OnFailure != FailOpen {
		t.Fatalf("failure modes %s, %s", p.Limit("local").OnFailure, p.Limit("regional").OnFailure)
	}
}
