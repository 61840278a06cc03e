package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/chaos/workload"
)

func TestDefaultPolicyAndClassesAgree(t *testing.T) {
	specs, err := limitSpecs([]byte(DefaultPolicy), DefaultClasses())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]bool{}
	for _, s := range specs {
		byName[s.Name] = true
		if s.Interval <= 0 || s.Burst <= 0 {
			t.Errorf("limit %q: interval %s burst %d", s.Name, s.Interval, s.Burst)
		}
	}
	// The tenant limit's burst must outlast failure detection (about 5 s),
	// or the state-survival check cannot tell a lost TAT from a refill.
	for _, s := range specs {
		if s.Name == "tenant" && time.Duration(s.Burst)*s.Interval < 10*time.Second {
			t.Errorf("tenant burst refills in %s; the state check needs more than 10s", time.Duration(s.Burst)*s.Interval)
		}
	}
	for _, c := range DefaultClasses() {
		for _, l := range c.Limits {
			if !byName[l] {
				t.Errorf("class %q names limit %q missing from the specs", c.Name, l)
			}
		}
	}
}

func TestLimitSpecsRejectsBadInput(t *testing.T) {
	for name, tc := range map[string]struct {
		policy  string
		classes []workload.Class
		want    string
	}{
		"bad yaml":      {"limits: [", nil, "chaos policy"},
		"unknown limit": {DefaultPolicy, []workload.Class{{Name: "c", Limits: []string{"nope"}}}, `class "c" expects limit "nope"`},
		"shadow limit": {"version: x\nlimits:\n  - {name: s, match: [a], rate: 1/s, burst: 1, shadow: true}\n",
			[]workload.Class{{Name: "c", Limits: []string{"s"}}}, `expects limit "s"`},
	} {
		if _, err := limitSpecs([]byte(tc.policy), tc.classes); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", name, err, tc.want)
		}
	}
}

func TestRunRefusesBadInputBeforeStarting(t *testing.T) {
	_, err := Run(t.Context(), Options{NodeBin: "/nonexistent", ClientCmd: []string{"x"}, Dir: t.TempDir(),
		Classes: []workload.Class{{Name: "c", Limits: []string{"nope"}}}}, ShortSuite())
	if err == nil || !strings.Contains(err.Error(), `expects limit "nope"`) {
		t.Fatalf("got %v", err)
	}
	if _, err := Run(t.Context(), Options{}, ShortSuite()); err == nil {
		t.Fatal("empty options accepted")
	}
}
