package chaos

import "testing"

func TestRegionSuite_inFullSuiteNotGray(t *testing.T) {
	var found bool
	for _, s := range FullSuite() {
		if s.Name() != "region-cut" {
			continue
		}
		found = true
		if s.Regions != 2 || s.Nodes%s.Regions != 0 || s.Nemesis.Owners != 1 || s.Nemesis.Crash || s.Nemesis.Stale {
			t.Errorf("region-cut: %d nodes in %d regions, owners %d, crash %v, stale %v; want an even split and no fault term",
				s.Nodes, s.Regions, s.Nemesis.Owners, s.Nemesis.Crash, s.Nemesis.Stale)
		}
		specs, err := limitSpecs(s.Workload.Policy, s.Workload.Classes)
		if err != nil || len(specs) != 1 || specs[0].OnFailure != "closed" {
			t.Errorf("region-cut policy: %+v, %v; want one limit failing closed", specs, err)
		}
	}
	if !found {
		t.Error("the full suite lacks region-cut")
	}
	for _, s := range GraySuite() {
		if s.Regions > 0 {
			t.Errorf("the gray suite runs %s", s.Name())
		}
	}
}
