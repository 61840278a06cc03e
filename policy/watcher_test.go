package policy

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func policyYAML(version string) string {
	return "version: " + version + "\nlimits: [{name: a, match: [tenant], rate: 5/s, burst: 3}]\n"
}

const badYAML = "version: bad\nlimits: [{name: a, match: [tenant], rate: 5/x, burst: 3}]\n"

// syncBuffer is a log sink the test can read while the watcher writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type fixture struct {
	dir, path string
	w         *Watcher
	reg       *prometheus.Registry
	logs      *syncBuffer
	updates   <-chan *Policy
}

func newFixture(t *testing.T, initial string) *fixture {
	t.Helper()
	f := &fixture{dir: t.TempDir(), reg: prometheus.NewRegistry(), logs: &syncBuffer{}}
	f.path = filepath.Join(f.dir, "policy.yaml")
	writeFile(t, f.path, initial)
	logger := slog.New(slog.NewTextHandler(f.logs, nil))
	w, err := NewWatcher(WatcherConfig{Path: f.path, Debounce: 10 * time.Millisecond}, logger, f.reg)
	if err != nil {
		t.Fatal(err)
	}
	f.w, f.updates = w, w.Subscribe()
	return f
}

// run starts Run and stops it, checking it returns nil, when the test ends.
func (f *fixture) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func (f *fixture) reloads(result string) float64 {
	return testutil.ToFloat64(f.w.met.reloads.WithLabelValues(result))
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// replaceFile writes content beside path and renames it over path, as
// editors and config tools do.
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	writeFile(t, tmp, content)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func waitVersion(t *testing.T, ch <-chan *Policy, version string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case p := <-ch:
			if p.Version == version {
				return
			}
		case <-deadline:
			t.Fatalf("version %q was never loaded", version)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestNewWatcher_initialLoad(t *testing.T) {
	f := newFixture(t, policyYAML("v1"))
	if v := f.w.Current().Version; v != "v1" {
		t.Fatalf("Current().Version = %q", v)
	}
	if got := f.reloads("ok"); got != 1 {
		t.Errorf("ok loads = %v, want 1", got)
	}
	if got := testutil.ToFloat64(f.w.met.info.WithLabelValues("v1")); got != 1 {
		t.Errorf("weir_policy_info{version=v1} = %v", got)
	}
	if got := testutil.ToFloat64(f.w.met.lastOK); got < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Errorf("last success timestamp = %v", got)
	}
	if !strings.Contains(f.logs.String(), "version=v1") {
		t.Errorf("the active version is not logged: %s", f.logs)
	}
	if n, err := testutil.GatherAndCount(f.reg); err != nil || n != 4 {
		t.Errorf("gathered %d series (%v), want 4", n, err)
	}
}

func TestNewWatcher_badInitialFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.yaml")
	reg := prometheus.NewRegistry()
	for _, tc := range []struct {
		cfg  WatcherConfig
		want string
	}{
		{WatcherConfig{Path: path}, "no such file"},
		{WatcherConfig{}, "path is required"},
		{WatcherConfig{Path: path, Debounce: -1}, "debounce -1ns is negative"},
	} {
		if _, err := NewWatcher(tc.cfg, nil, reg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewWatcher(%+v) error = %v, want %q", tc.cfg, err, tc.want)
		}
	}
	writeFile(t, path, badYAML)
	_, err := NewWatcher(WatcherConfig{Path: path}, nil, reg)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `limits[0] "a": rate`) {
		t.Errorf("error = %v", err)
	}
	// Nothing was registered: a good file can now use the same registry.
	writeFile(t, path, policyYAML("v1"))
	if _, err := NewWatcher(WatcherConfig{Path: path}, nil, reg); err != nil {
		t.Fatal(err)
	}
	if _, err := NewWatcher(WatcherConfig{Path: path}, nil, reg); err == nil {
		t.Error("registering twice on one registry succeeded")
	}
}

func TestWatcher_Run_goodThenBadFile(t *testing.T) {
	f := newFixture(t, policyYAML("v1"))
	f.run(t)

	// Renames, so that no load can see a half-written file and the counts
	// below are exact.
	replaceFile(t, f.path, policyYAML("v2"))
	waitVersion(t, f.updates, "v2")
	if got := testutil.ToFloat64(f.w.met.info.WithLabelValues("v2")); got != 1 {
		t.Errorf("info{v2} = %v", got)
	}
	if n := testutil.CollectAndCount(f.w.met.info); n != 1 {
		t.Errorf("weir_policy_info has %d series, want only the active one", n)
	}

	replaceFile(t, f.path, badYAML)
	waitFor(t, "the error to be counted", func() bool { return f.reloads("error") == 1 })
	if v := f.w.Current().Version; v != "v2" {
		t.Errorf("after a bad file Current().Version = %q, want v2", v)
	}
	logs := f.logs.String()
	if !strings.Contains(logs, "policy rejected") || !strings.Contains(logs, f.path) || !strings.Contains(logs, "5/x") {
		t.Errorf("the rejection is not logged with file and error:\n%s", logs)
	}

	replaceFile(t, f.path, policyYAML("v3")) // a good file again
	waitVersion(t, f.updates, "v3")
	if ok, bad := f.reloads("ok"), f.reloads("error"); ok != 3 || bad != 1 {
		t.Errorf("reloads ok=%v error=%v, want 3 and 1", ok, bad)
	}
}

func TestWatcher_Run_inPlaceWriteAndRenameOver(t *testing.T) {
	f := newFixture(t, policyYAML("v1"))
	f.run(t)
	writeFile(t, f.path, policyYAML("v2")) // truncate and write
	waitVersion(t, f.updates, "v2")
	replaceFile(t, f.path, policyYAML("v3")) // atomic replace
	waitVersion(t, f.updates, "v3")
	// A bad file beside it is none of the watcher's business.
	writeFile(t, filepath.Join(f.dir, "other.yaml"), badYAML)
	replaceFile(t, f.path, policyYAML("v4"))
	waitVersion(t, f.updates, "v4")
	if strings.Contains(f.logs.String(), "other.yaml") {
		t.Errorf("other.yaml was read:\n%s", f.logs)
	}
}

// TestWatcher_Run_configMapSwap mimics a Kubernetes ConfigMap volume:
// policy.yaml -> ..data/policy.yaml, ..data -> ..v1, and an update makes
// ..v2 and renames a new symlink over ..data.
func TestWatcher_Run_configMapSwap(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []string{"v1", "v2"} {
		if err := os.Mkdir(filepath.Join(dir, ".."+v), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, ".."+v, "policy.yaml"), policyYAML(v))
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink("..v1", filepath.Join(dir, "..data")))
	must(os.Symlink(filepath.Join("..data", "policy.yaml"), filepath.Join(dir, "policy.yaml")))
	w, err := NewWatcher(WatcherConfig{Path: filepath.Join(dir, "policy.yaml"), Debounce: time.Millisecond}, nil, nil)
	must(err)
	updates := w.Subscribe()
	f := &fixture{w: w}
	f.run(t)

	must(os.Symlink("..v2", filepath.Join(dir, "..data_tmp")))
	must(os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	waitVersion(t, updates, "v2")
}

func TestWatcher_Reload(t *testing.T) {
	f := newFixture(t, policyYAML("v1"))

	writeFile(t, f.path, policyYAML("v2"))
	if err := f.w.Reload(); err != nil {
		t.Fatal(err)
	}
	if v := f.w.Current().Version; v != "v2" {
		t.Errorf("Current().Version = %q", v)
	}
	if p := <-f.updates; p.Version != "v2" {
		t.Errorf("notified %q", p.Version)
	}

	// Unchanged content: a successful load, but nothing new to announce.
	if err := f.w.Reload(); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-f.updates:
		t.Errorf("notified %q for unchanged content", p.Version)
	default:
	}

	writeFile(t, f.path, badYAML)
	if err := f.w.Reload(); !errors.Is(err, ErrInvalid) {
		t.Errorf("Reload of a bad file = %v", err)
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Remove(f.path))
	if err := f.w.Reload(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Reload of a missing file = %v", err)
	}
	if v := f.w.Current().Version; v != "v2" {
		t.Errorf("Current().Version = %q after bad reloads, want v2", v)
	}
	if ok, bad := f.reloads("ok"), f.reloads("error"); ok != 3 || bad != 2 {
		t.Errorf("reloads ok=%v error=%v, want 3 and 2", ok, bad)
	}
}

func TestWatcher_Subscribe_latestWins(t *testing.T) {
	f := newFixture(t, policyYAML("v1"))
	for _, v := range []string{"v2", "v3"} {
		writeFile(t, f.path, policyYAML(v))
		if err := f.w.Reload(); err != nil {
			t.Fatal(err)
		}
	}
	if p := <-f.updates; p.Version != "v3" {
		t.Errorf("got %q, want the latest, v3", p.Version)
	}
	select {
	case p := <-f.updates:
		t.Errorf("stale %q still queued", p.Version)
	default:
	}
}

func TestStatic(t *testing.T) {
	p := Builtin()
	w := Static(p)
	var src Source = w
	if src.Current() != p || w.Reload() != nil {
		t.Error("Static does not serve its policy")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Run(ctx); err != nil {
		t.Errorf("Run = %v", err)
	}
	select {
	case <-w.Subscribe():
		t.Error("Static delivered an update")
	default:
	}
}
