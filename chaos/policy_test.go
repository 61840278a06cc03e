package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/weirhq/weir/chaos/history"
	"github.com/weirhq/weir/chaos/workload"
	"github.com/weirhq/weir/policy"
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

func TestLimitSpecs_defaultFailurePolicyIsTheShare(t *testing.T) {
	specs, err := limitSpecs([]byte(DefaultPolicy), DefaultClasses())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]history.LimitSpec{}
	for _, s := range specs {
		got[s.Name] = s
	}
	if q := got["quota"]; q.OnFailure != "local" || !q.Default || !q.FallbackShare || q.RatePer != time.Second {
		t.Errorf("quota (no on_failure) = %+v, want the default local share", q)
	}
	if tn := got["tenant"]; tn.Default || tn.FallbackShare || tn.FallbackInterval != time.Second || tn.FallbackBurst != 2 {
		t.Errorf("tenant (local, 1/s burst 2) = %+v", tn)
	}
	if a := got["api"]; a.OnFailure != "open" || a.Default {
		t.Errorf("api (open) = %+v", a)
	}
	hot, err := limitSpecs([]byte(HotKeyPolicy), hotKeyWorkload().Classes)
	if err != nil {
		t.Fatal(err)
	}
	if len(hot) != 2 || hot[0].Name != "hot" || !hot[0].Default || hot[0].Interval != 10*time.Millisecond || hot[0].Burst != 10 {
		t.Errorf("hot = %+v, want 100/s burst 10 with the default failure policy", hot)
	}
	// A failure mode written in the defaults is not weir's default.
	withDefault := strings.Replace(HotKeyPolicy, "limits:", "defaults: {on_failure: open}\nlimits:", 1)
	open, err := limitSpecs([]byte(withDefault), nil)
	if err != nil {
		t.Fatal(err)
	}
	if open[0].Default || open[0].OnFailure != "open" {
		t.Errorf("hot with defaults.on_failure open = %+v", open[0])
	}
}

func TestFullSuite_scenarios(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range FullSuite() {
		if seen[s.Name()] {
			t.Errorf("scenario %s twice", s.Name())
		}
		seen[s.Name()] = true
		if s.Nemesis.inject == nil || s.Nemesis.targets == nil || s.Nemesis.Summary == "" {
			t.Errorf("scenario %s lacks inject, targets or summary", s.Name())
		}
		o := s.options(Options{Policy: []byte(DefaultPolicy), Classes: DefaultClasses()})
		if _, err := limitSpecs(o.Policy, o.Classes); err != nil {
			t.Errorf("scenario %s: %v", s.Name(), err)
		}
	}
	for _, name := range []string{"cpu-starve", "slow-owner", "stalls", "redis-slow", "flapping-partition",
		"scale-down-up", "hotkey-idle", "hotkey-hogs", "hotkey-stalls", "redis-failover"} {
		if !seen[name] {
			t.Errorf("full suite lacks %s", name)
		}
	}
	if len(seen) < 12 {
		t.Errorf("%d scenarios, want at least 12", len(seen))
	}
	for _, s := range FullSuite() {
		if s.Name() == "scale-down-up" && s.Nodes != 4 {
			t.Errorf("scale-down-up runs %d nodes, want 4", s.Nodes)
		}
	}
}

// TestPolicies_leasableClassIsLeased: every scenario's policy has a
// leasable limit that is large enough to lease in its cluster (so `weir
// policy check --nodes N` does not warn), its spec carries the lease terms,
// and a class of the workload matches that limit alone, so a non-owner may
// decide its requests from leases. Multi-region scenarios are the exception:
// their one limit is scope: global, which may not be leased (docs/regions.md
// §6.10); so is the concurrency scenario, whose one limit holds permits
// (a concurrency limit is never leased).
func TestPolicies_leasableClassIsLeased(t *testing.T) {
	for _, s := range FullSuite() {
		if s.Regions > 0 || s.Name() == "rlqs-kill-owner" || s.Name() == "concurrency-kill-owner" {
			continue // RLQS: the limit answers Envoy's domain, and its lease holders are the streams
		}
		o := s.options(Options{Nodes: 3, Policy: []byte(DefaultPolicy), Classes: DefaultClasses()})
		p, err := policy.Parse("chaos policy", o.Policy)
		if err != nil {
			t.Fatal(err)
		}
		if w := p.LeaseWarnings(o.Nodes); len(w) > 0 {
			t.Errorf("%s: lease warnings with %d nodes: %v", s.Name(), o.Nodes, w)
		}
		specs, err := limitSpecs(o.Policy, o.Classes)
		if err != nil {
			t.Fatal(err)
		}
		leasable := map[string]bool{}
		for _, sp := range specs {
			if l := p.Limit(sp.Name); l.Lease != nil {
				leasable[sp.Name] = true
				if sp.LeaseMax != l.Lease.Max || sp.LeaseTTL != l.Lease.TTL || sp.Consistency != "fast" {
					t.Errorf("%s: spec %+v does not carry the lease terms %+v", s.Name(), sp, *l.Lease)
				}
			}
		}
		found := false
		for _, c := range o.Classes {
			desc := map[string]string{}
			for k, v := range c.Descriptors {
				desc[k] = strings.NewReplacer("{k}", "0", "{r}", "0").Replace(v)
			}
			ms, err := p.Resolve(desc, nil)
			if err != nil {
				t.Fatalf("%s: class %s: %v", s.Name(), c.Name, err)
			}
			if len(ms) == 1 && leasable[ms[0].Limit.Name] && ms[0].Leasable(o.Nodes) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no class matches a leasable limit alone", s.Name())
		}
	}
}
