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

// TestImage_help_printsFlags runs the image with --help, as a user trying it
// first would.
func TestImage_help_printsFlags(t *testing.T) {
	requireEngine(t)
	out, err := exec.Command("podman", "run", "--rm", image, "--help").CombinedOutput()
	// flag.ErrHelp: exit status 2, the flags on stderr.
	if exit, ok := err.(*exec.ExitError); err != nil && (!ok || exit.ExitCode() != 2) {
		t.Fatalf("--help: %v\n%s", err, out)
	}
	for _, want := range []string{"-peer-addr", "-redis-addr", "-policy", "-advertise-addr", "-shutdown-timeout"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("--help does not mention %s:\n%s", want, out)
		}
	}
}

// TestImage_config_nonRootAndPorts reads the image's configuration: the
// non-root user of distroless :nonroot and every port the node serves.
func TestImage_config_nonRootAndPorts(t *testing.T) {
	requireEngine(t)
	var cfg []struct {
		Config struct {
			User         string
			ExposedPorts map[string]struct{}
			Entrypoint   []string
		}
	}
	if err := json.Unmarshal([]byte(podman(t, "image", "inspect", image)), &cfg); err != nil || len(cfg) != 1 {
		t.Fatalf("image inspect: %v", err)
	}
	c := cfg[0].Config
	if c.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", c.User)
	}
	for _, p := range []string{"8080/tcp", "8081/tcp", "8082/tcp", "8092/tcp", "7946/tcp", "7946/udp"} {
		if _, ok := c.ExposedPorts[p]; !ok {
			t.Errorf("port %s not exposed (have %v)", p, c.ExposedPorts)
		}
	}
	if len(c.Entrypoint) != 1 || c.Entrypoint[0] != "/usr/local/bin/weir-node" {
		t.Errorf("entrypoint %v", c.Entrypoint)
	}
}

// TestImage_run_policyMountAndSIGTERM runs one node from the image with
// deploy/policy.yaml mounted, decides under that policy through the
// published HTTP port, checks the process runs as uid 65532, and stops it
// with SIGTERM: it must exit 0 well within the grace period.
func TestImage_run_policyMountAndSIGTERM(t *testing.T) {
	requireEngine(t)
	policy, err := filepath.Abs(filepath.Join(repoRoot, "deploy", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("weirtest-single-%d", os.Getpid())
	port := freePort(t)
	podman(t, "run", "-d", "--name", name, "-p", fmt.Sprintf("127.0.0.1:%d:8080", port),
		"-v", policy+":/etc/weir/policy.yaml:ro", image,
		"--grpc-addr=0.0.0.0:8081", "--http-addr=0.0.0.0:8080", "--policy=/etc/weir/policy.yaml")
	t.Cleanup(func() { command(time.Minute, "podman", "rm", "-f", "-t", "0", name) })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	waitFor(t, time.Minute, "node ready", func() error { _, err := get("http://" + addr + "/readyz"); return err })

	// per-user in deploy/policy.yaml: burst 10, so the 11th call in a row
	// for one user is refused. The built-in policy would answer otherwise.
	allowed := 0
	for range 11 {
		a, err := decide(addr, map[string]string{"tenant": "acme", "user": "u1"})
		if err != nil {
			t.Fatal(err)
		}
		if a.Allowed {
			allowed++
		}
	}
	if allowed != 10 {
		t.Errorf("%d of 11 calls allowed, want 10 (per-user burst of the mounted policy)", allowed)
	}
	metrics, err := get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if metric(metrics, "weir_policy_info", `version="deploy.1"`) != 1 {
		t.Errorf("weir_policy_info does not show the mounted policy deploy.1")
	}

	pid := podman(t, "inspect", "-f", "{{.State.Pid}}", name)
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "Uid:") && strings.Fields(line)[1] != "65532" {
			t.Errorf("node runs as %s, want uid 65532", line)
		}
	}

	const grace = 15 * time.Second
	start := time.Now()
	podman(t, "stop", "-t", fmt.Sprint(grace.Seconds()), name)
	took := time.Since(start)
	code := podman(t, "inspect", "-f", "{{.State.ExitCode}}", name)
	if code != "0" || took >= grace {
		t.Errorf("SIGTERM: exit code %s after %s, want 0 within %s", code, took.Round(time.Millisecond), grace)
	}
	logs := logsOf(name)
	if !strings.Contains(logs, "shutting down") {
		t.Errorf("no shutdown in the logs:\n%s", lastLines(logs, 20))
	}
	t.Logf("SIGTERM to exit: %s", took.Round(time.Millisecond))
}
