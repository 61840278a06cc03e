package containertest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// services the suite brings up: all of deploy/compose.yaml but Grafana,
// which has no image to stand in for (no Debian package); its dashboard
// is checked query by query against Prometheus instead.
var services = []string{"redis", "prometheus", "weir-1", "weir-2", "weir-3"}

var nodes = []string{"weir-1", "weir-2", "weir-3"}

// composeFile is the compose file the suite runs, in deploy/:
// compose.yaml, or WEIR_TEST_COMPOSE_FILE to try a variant of it.
func composeFile() string {
	if f := os.Getenv("WEIR_TEST_COMPOSE_FILE"); f != "" {
		return f
	}
	return "compose.yaml"
}

// cluster is deploy/compose.yaml brought up under a project name of its
// own, with the host ports moved to free ones.
type cluster struct {
	project string
	env     []string
	http    map[string]string // node service -> container IP:8080
	grpc    map[string]string // node service -> container IP:8081
	prom    string            // Prometheus on the published loopback port
}

// compose runs podman-compose on deploy/compose.yaml for c's project.
func (c *cluster) compose(timeout time.Duration, args ...string) (string, error) {
	cmd := exec.Command("podman-compose", append([]string{"-p", c.project, "-f", composeFile()}, args...)...)
	cmd.Dir = filepath.Join(repoRoot, "deploy")
	cmd.Env = append(os.Environ(), c.env...)
	done := make(chan struct{})
	timer := time.AfterFunc(timeout, func() {
		select {
		case <-done:
		default:
			cmd.Process.Kill()
		}
	})
	defer timer.Stop()
	out, err := cmd.CombinedOutput()
	close(done)
	if err != nil {
		return string(out), fmt.Errorf("podman-compose %s: %w\n%s", strings.Join(args, " "), err, lastLines(string(out), 40))
	}
	return string(out), nil
}

// ctr is the container name of a service (podman-compose names them
// <project>_<service>_1).
func (c *cluster) ctr(service string) string { return c.project + "_" + service + "_1" }

// leftovers lists what of c's project is still there: containers, pods,
// networks.
func (c *cluster) leftovers(t *testing.T) (ctrs, pods, nets string) {
	label := "label=io.podman.compose.project=" + c.project
	ctrs = podman(t, "ps", "-a", "--filter", label, "--format", "{{.Names}}")
	pods = podman(t, "pod", "ls", "--filter", "name="+c.project, "--format", "{{.Name}}")
	nets = podman(t, "network", "ls", "--filter", "name="+c.project, "--format", "{{.Name}}")
	return ctrs, pods, nets
}

// upCluster brings the compose file up and waits until every node is
// ready and Prometheus answers. Cleanup removes whatever is left, should
// the test stop before its own `down`.
func upCluster(t *testing.T) *cluster {
	c := &cluster{
		project: fmt.Sprintf("weirtest%d", os.Getpid()),
		http:    map[string]string{},
		grpc:    map[string]string{},
	}
	prom := freePort(t)
	c.env = []string{
		fmt.Sprintf("WEIR_HTTP_PORT=%d", freePort(t)),
		fmt.Sprintf("WEIR_GRPC_PORT=%d", freePort(t)),
		fmt.Sprintf("PROMETHEUS_PORT=%d", prom),
		fmt.Sprintf("GRAFANA_PORT=%d", freePort(t)),
	}
	c.prom = fmt.Sprintf("127.0.0.1:%d", prom)
	t.Cleanup(func() {
		if ctrs, pods, nets := c.leftovers(t); ctrs+pods+nets != "" {
			c.compose(3*time.Minute, "down", "-t", "2")
			for _, n := range strings.Fields(nets) {
				command(time.Minute, "podman", "network", "rm", "-f", n)
			}
		}
	})
	if _, err := c.compose(5*time.Minute, append([]string{"up", "-d", "--no-build"}, services...)...); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		ip := containerIP(t, c.ctr(n))
		c.http[n], c.grpc[n] = ip+":8080", ip+":8081"
		waitFor(t, 2*time.Minute, n+" ready", func() error {
			if _, err := get("http://" + c.http[n] + "/readyz"); err != nil {
				return fmt.Errorf("%w; its log ends:\n%s", err, lastLines(logsOf(c.ctr(n)), 8))
			}
			return nil
		})
	}
	waitFor(t, 2*time.Minute, "prometheus ready", func() error {
		_, err := get("http://" + c.prom + "/-/ready")
		return err
	})
	return c
}

// metrics scrapes one node.
func (c *cluster) metrics(t *testing.T, node string) string {
	t.Helper()
	text, err := get("http://" + c.http[node] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// sum adds a metric over the three nodes.
func (c *cluster) sum(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	var s float64
	for _, n := range nodes {
		s += metric(c.metrics(t, n), name, labels...)
	}
	return s
}

// TestCompose_cluster brings deploy/compose.yaml up with podman-compose
// and checks it as its README section promises: one cluster of three,
// decisions forwarded to owners, a hot key held to its limit across all
// three nodes, every Prometheus target up, every dashboard query with data
// under traffic, a graceful SIGTERM, and `down` leaving nothing behind.
func TestCompose_cluster(t *testing.T) {
	requireEngine(t)
	start := time.Now()
	c := upCluster(t)
	t.Logf("compose up and ready in %s", time.Since(start).Round(time.Second))

	ok := t.Run("members", c.testMembers)
	ok = t.Run("prometheus_targets_up", c.testTargetsUp) && ok
	if !ok {
		t.Fatal("the cluster is not up; the remaining checks would only repeat it")
	}
	t.Run("forwards_to_owners", c.testForwards)
	t.Run("hot_key_bound", c.testHotKey)
	t.Run("envoy_rls", c.testEnvoy)
	t.Run("dashboard_queries", c.testDashboard)
	t.Run("sigterm_handoff", c.testSIGTERM)
	t.Run("down_leaves_nothing", c.testDown)
}

// testMembers runs `weir status` inside the compose network: every node
// answers and sees three members.
func (c *cluster) testMembers(t *testing.T) {
	addrs := "--addr=weir-1:8092,weir-2:8092,weir-3:8092"
	var view struct {
		Nodes []struct {
			Node    string   `json:"node"`
			Members []string `json:"members"`
		} `json:"nodes"`
	}
	waitFor(t, time.Minute, "weir status sees three nodes of three members", func() error {
		out, err := command(time.Minute, "podman", "exec", c.ctr("weir-1"), "weir", "status", addrs, "--json")
		if err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(out), &view); err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		if len(view.Nodes) != 3 {
			return fmt.Errorf("%d nodes answered: %s", len(view.Nodes), out)
		}
		for _, n := range view.Nodes {
			if len(n.Members) != 3 {
				return fmt.Errorf("%s sees members %v", n.Node, n.Members)
			}
		}
		return nil
	})
	for _, n := range nodes {
		if m := metric(c.metrics(t, n), "weir_cluster_members"); m != 3 {
			t.Errorf("%s: weir_cluster_members %g, want 3", n, m)
		}
	}
}

// testTargetsUp asks Prometheus's HTTP API for its targets: every weir
// node is scraped and up.
func (c *cluster) testTargetsUp(t *testing.T) {
	waitFor(t, time.Minute, "every Prometheus target up", func() error {
		body, err := get("http://" + c.prom + "/api/v1/targets?state=active")
		if err != nil {
			return err
		}
		var r struct {
			Data struct {
				ActiveTargets []struct {
					ScrapeURL string `json:"scrapeUrl"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"activeTargets"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			return err
		}
		if len(r.Data.ActiveTargets) != len(nodes) {
			return fmt.Errorf("%d targets, want %d: %s", len(r.Data.ActiveTargets), len(nodes), body)
		}
		for _, tg := range r.Data.ActiveTargets {
			if tg.Health != "up" {
				return fmt.Errorf("%s is %s: %s", tg.ScrapeURL, tg.Health, tg.LastError)
			}
		}
		return nil
	})
}
