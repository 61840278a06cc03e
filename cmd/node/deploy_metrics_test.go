package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/weirhq/weir/redisbackend/redistest"
)

var metricNameRE = regexp.MustCompile(`\bweir_[a-z0-9_]+`)

// deployMetricNames returns every weir metric named in an expression of the
// Grafana dashboard or the Prometheus alert rules, each with the file that
// names it.
func deployMetricNames(t *testing.T) map[string]string {
	t.Helper()
	names := map[string]string{}
	deploy := filepath.Join("..", "..", "deploy")

	var dash struct {
		Panels []struct {
			Targets []struct{ Expr string } `json:"targets"`
		} `json:"panels"`
	}
	data, err := os.ReadFile(filepath.Join(deploy, "grafana", "dashboards", "weir.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("weir.json: %v", err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, n := range metricNameRE.FindAllString(tg.Expr, -1) {
				names[n] = "grafana/dashboards/weir.json"
			}
		}
	}

	var rules struct {
		Groups []struct {
			Rules []struct{ Expr string } `yaml:"rules"`
		} `yaml:"groups"`
	}
	data, err = os.ReadFile(filepath.Join(deploy, "prometheus", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			for _, n := range metricNameRE.FindAllString(r.Expr, -1) {
				names[n] = "prometheus/alerts.yaml"
			}
		}
	}
	if len(names) < 10 {
		t.Fatalf("only %d metric names found; is the parsing right? %v", len(names), names)
	}
	return names
}

// scrapeFamilies returns the metric family names a node's /metrics shows,
// with the series names of histograms and summaries (_bucket, _sum,
// _count) added.
func scrapeFamilies(t *testing.T, httpAddr string) map[string]bool {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for name := range fams {
		out[name] = true
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			out[name+suffix] = true
		}
	}
	return out
}

const metricsPolicy = `
limits:
  - {name: fast, match: [tenant, user], rate: 100/s, burst: 100}
  - {name: strict, match: [tenant, api], group: api, rate: 100/s, burst: 100, consistency: strict, on_failure: open}
  - {name: edge, domain: edge, match: [remote_address], rate: 10/s, burst: 10}
`

// TestDeploy_everyDashboardAndAlertMetricIsExported starts two nodes with
// Redis and gossip, exercises one (decisions until one is forwarded, Envoy
// RLS calls, a Redis outage for the fallback series) and checks that every metric
// the dashboard and the alert rules name is on its /metrics.
func TestDeploy_everyDashboardAndAlertMetricIsExported(t *testing.T) {
	names := deployMetricNames(t)
	srv := redistest.Start(t)
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(metricsPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	common := []string{"--redis-addr", srv.Addr(), "--policy", path, "--redis-timeout", "30ms", "--gossip-addr", "127.0.0.1:0"}
	n, c := startNode(t, append(common, "--node-name", "a")...)
	startNode(t, append(common, "--node-name", "b", "--join", n.members.GossipAddr())...)
	// Decide for new tenants until some belong to b and are forwarded.
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; !scrapeFamilies(t, n.httpAddr())["weir_forwards_total"]; i++ {
		if time.Now().After(deadline) {
			t.Fatal("no decision was forwarded to the second node within 10s")
		}
		for j := range 20 {
			decide(t, c, 1, "tenant", fmt.Sprintf("t%d-%d", i, j), "user", "u")
		}
	}
	decide(t, c, 1, "tenant", "a", "api", "x")
	shouldRateLimit(t, rlsClient(t, n), "edge", "remote_address", "192.0.2.1")
	shouldRateLimit(t, rlsClient(t, n), "nowhere", "remote_address", "192.0.2.1")
	srv.Stop()
	if r := decide(t, c, 1, "tenant", "a", "api", "y"); r.Fallback == nil {
		t.Fatalf("Redis is down but the decision was not a fallback: %+v", r)
	}

	exported := scrapeFamilies(t, n.httpAddr())
	var missing []string
	for name, file := range names {
		if !exported[name] {
			missing = append(missing, fmt.Sprintf("%s (named in deploy/%s)", name, file))
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("not exported by a running node:\n  %s", strings.Join(missing, "\n  "))
	}
}
