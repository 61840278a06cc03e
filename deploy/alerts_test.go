package deploy

import (
	"os"
	"os/exec"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestAlerts_promtoolTestRules runs the unit tests of the alert rules,
// prometheus/alerts_test.yaml, with promtool. It skips without promtool
// unless CI is set (CI installs it: Debian's prometheus package).
func TestAlerts_promtoolTestRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool is not installed (Debian: apt-get install prometheus)")
		}
		t.Skip("promtool is not installed (Debian: apt-get install prometheus); the alert unit tests need it")
	}
	cmd := exec.Command(promtool, "test", "rules", "alerts_test.yaml")
	cmd.Dir = "prometheus"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// TestAlerts_everyAlertUnitTested checks that every alert in
// prometheus/alerts.yaml has a unit test in which it fires and one in
// which it stays silent, so that a new alert cannot go untested.
func TestAlerts_everyAlertUnitTested(t *testing.T) {
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				AlertName string           `yaml:"alertname"`
				ExpAlerts []map[string]any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	for file, v := range map[string]any{"prometheus/alerts.yaml": &rules, "prometheus/alerts_test.yaml": &tests} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, v); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.AlertName] = true
			} else {
				silent[a.AlertName] = true
			}
		}
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			if !fires[r.Alert] {
				t.Errorf("alert %s: no unit test in which it fires (prometheus/alerts_test.yaml)", r.Alert)
			}
			if !silent[r.Alert] {
				t.Errorf("alert %s: no unit test in which it stays silent (prometheus/alerts_test.yaml)", r.Alert)
			}
		}
	}
	if n == 0 {
		t.Fatal("no alerts found in prometheus/alerts.yaml")
	}
}
