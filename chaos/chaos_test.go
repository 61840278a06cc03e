package chaos

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/weirhq/weir/chaos/netlab"
)

// TestShortSuite runs the CI suite against the real binaries: an owner
// killed and restarted, a minority partition, a Redis outage, CPU
// starvation. It needs
// root, iproute2 and nftables; without them it skips, except under CI=true,
// where it fails. WEIR_CHAOS_OUT keeps the results (histories, logs, plots,
// report.md) in that directory instead of a temporary one.
func TestShortSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos suite: not in -short mode")
	}
	requireLab(t)
	bin := t.TempDir()
	build(t, filepath.Join(bin, "node"), "github.com/weirhq/weir/cmd/node")
	build(t, filepath.Join(bin, "weir-chaos"), "github.com/weirhq/weir/cmd/weir-chaos")
	dir := os.Getenv("WEIR_CHAOS_OUT")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	outs, err := Run(t.Context(), Options{
		NodeBin:   filepath.Join(bin, "node"),
		ClientCmd: []string{filepath.Join(bin, "weir-chaos"), "client"},
		Dir:       dir,
		Log:       testLog{t},
	}, ShortSuite())
	if report, rerr := os.ReadFile(filepath.Join(dir, "report.md")); rerr == nil {
		t.Logf("report:\n%s", report)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != len(ShortSuite()) {
		t.Fatalf("%d of %d scenarios ran", len(outs), len(ShortSuite()))
	}
	for _, o := range outs {
		if !o.OK() {
			t.Errorf("scenario %s failed (logs and history in %s): %v %v", o.Scenario.Name(), o.Dir, o.Err, o.Result.Violations)
		}
	}
}

// requireLab skips when this machine cannot host a lab, or fails under CI.
func requireLab(t *testing.T) {
	t.Helper()
	lab, err := netlab.New("probe")
	if errors.Is(err, netlab.ErrUnsupported) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chaos suite must run in CI: %v", err)
		}
		t.Skipf("chaos suite: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := lab.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("chaos suite: redis-server is not on PATH")
	}
}

func build(t *testing.T, out, pkg string) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	cmd := exec.Command(goBin, "build", "-o", out, pkg)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(string(p[:len(p)-min(1, len(p))]))
	return len(p), nil
}
