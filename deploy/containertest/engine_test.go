package containertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// image is the tag the compose file gives the node image.
const image = "weir:dev"

// repoRoot is the repository root, the build context of deploy/Dockerfile.
var repoRoot = filepath.Join("..", "..")

// built remembers the one image build all tests share.
var built struct {
	once sync.Once
	err  error
}

// requireEngine skips unless WEIR_TEST_DEPLOY=1, fails (in CI) or skips
// (elsewhere) when a tool is missing, and builds the stand-in base images
// and the node image once.
func requireEngine(t *testing.T) {
	t.Helper()
	if os.Getenv("WEIR_TEST_DEPLOY") != "1" {
		t.Skip("container suite: set WEIR_TEST_DEPLOY=1 (make test-deploy) to run it")
	}
	for _, tool := range []string{"podman", "buildah", "podman-compose", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("container suite: %s is not installed (CI must install podman buildah podman-compose runc)", tool)
			}
			t.Skipf("container suite: %s is not installed (Debian: apt-get install podman buildah podman-compose runc)", tool)
		}
	}
	built.once.Do(func() { built.err = buildImages() })
	if built.err != nil {
		t.Fatal(built.err)
	}
}

// buildImages builds the stand-in base images (skipping those that exist)
// and the node image from deploy/Dockerfile with the host's module cache
// mounted, no pulls and no module proxy.
func buildImages() error {
	start := time.Now()
	if _, err := command(10*time.Minute, "bash", filepath.Join(repoRoot, "deploy", "images", "build-stand-ins.sh")); err != nil {
		return err
	}
	// The modules the image build needs, through the host's ordinary Go
	// client (a no-op when the cache has them).
	dl := exec.Command("go", "mod", "download")
	dl.Dir = repoRoot
	if out, err := dl.CombinedOutput(); err != nil {
		return fmt.Errorf("go mod download: %w\n%s", err, out)
	}
	modcache, err := command(time.Minute, "go", "env", "GOMODCACHE")
	if err != nil {
		return err
	}
	// A build cache of its own, kept between runs: the warm build then
	// compiles only what changed.
	buildcache := filepath.Join(os.TempDir(), "weir-deploy-gocache")
	if v := os.Getenv("WEIR_DEPLOY_GOCACHE"); v != "" {
		buildcache = v
	}
	if err := os.MkdirAll(buildcache, 0o755); err != nil {
		return err
	}
	if err := warmBuildCache(buildcache); err != nil {
		return err
	}
	_, err = command(25*time.Minute, "podman", "build", "--pull=never",
		"-v", strings.TrimSpace(modcache)+":/go/pkg/mod",
		"-v", buildcache+":/root/.cache/go-build",
		"--build-arg", "GOPROXY=off",
		"-f", filepath.Join(repoRoot, "deploy", "Dockerfile"), "-t", image, repoRoot)
	if err != nil {
		return err
	}
	fmt.Printf("container suite: images built in %s\n", time.Since(start).Round(time.Second))
	return nil
}

// warmBuildCache compiles the image's two binaries on the host into the
// build cache the image build mounts, with the Dockerfile's settings
// (CGO off, -trimpath, the same -ldflags), so that the build inside the
// image finds every package compiled: about 1.5 minutes on the host
// against 9 to 17 inside the image from an empty cache (on two cores; the
// stand-in golang image carries the host's own toolchain, so the cache
// keys match; with another toolchain the image build compiles as before).
func warmBuildCache(dir string) error {
	out, err := os.MkdirTemp("", "weir-deploy-warm")
	if err != nil {
		return err
	}
	defer os.RemoveAll(out)
	for _, pkg := range []string{"./cmd/node", "./cmd/weir"} {
		cmd := exec.Command("go", "build", "-ldflags=-s -w", "-o", filepath.Join(out, filepath.Base(pkg)), pkg)
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "GOCACHE="+dir, "CGO_ENABLED=0", "GOFLAGS=-trimpath")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("warming the image's build cache: go build %s: %w\n%s", pkg, err, b)
		}
	}
	return nil
}

// command runs name with args and returns its stdout; an error carries
// the command and its output.
func command(timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w\n%s%s", name, strings.Join(args, " "), err, stdout.String(), lastLines(stderr.String(), 40))
	}
	return stdout.String(), nil
}

// lastLines keeps the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// podman runs podman and fails the test on error.
func podman(t *testing.T, args ...string) string {
	t.Helper()
	out, err := command(2*time.Minute, "podman", args...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// containerIP is a container's address on its (only) network; the host
// reaches it directly (rootful podman's bridge).
func containerIP(t *testing.T, name string) string {
	t.Helper()
	ip := podman(t, "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", name)
	if f := strings.Fields(ip); len(f) > 0 {
		return f[0]
	}
	t.Fatalf("container %s has no IP address", name)
	return ""
}

// freePort is a TCP port free on the loopback interface now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitFor polls cond every 200ms until it returns nil or timeout passes,
// then fails with its last error.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		<-tick.C
	}
}

var client = &http.Client{Timeout: 5 * time.Second}

// get fetches url and returns its body; any status but 200 is an error.
func get(url string) (string, error) {
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return string(body), fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return string(body), nil
}

// answer is the part of a /v1/decide answer the tests read.
type answer struct {
	Allowed  bool            `json:"allowed"`
	Fallback json.RawMessage `json:"fallback"`
}

// decide asks the node at httpAddr about descriptors over HTTP.
func decide(httpAddr string, descriptors map[string]string) (answer, error) {
	body, err := json.Marshal(map[string]any{"descriptors": descriptors})
	if err != nil {
		return answer{}, err
	}
	resp, err := client.Post("http://"+httpAddr+"/v1/decide", "application/json", bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests {
		return answer{}, fmt.Errorf("decide at %s: %s: %s", httpAddr, resp.Status, data)
	}
	var a answer
	if err := json.Unmarshal(data, &a); err != nil {
		return answer{}, fmt.Errorf("decide at %s: %w: %s", httpAddr, err, data)
	}
	return a, nil
}

// metric sums the samples of name whose labels contain every one of
// labels (as `key="value"`) in a Prometheus text exposition.
func metric(text, name string, labels ...string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name) || len(line) == len(name) || (line[len(name)] != '{' && line[len(name)] != ' ') {
			continue
		}
		match := true
		for _, l := range labels {
			match = match && strings.Contains(line, l)
		}
		if !match {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// logsOf is a container's log, stdout and stderr.
func logsOf(name string) string {
	out, _ := exec.Command("podman", "logs", name).CombinedOutput()
	return string(out)
}
