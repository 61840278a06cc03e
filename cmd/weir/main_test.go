package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runCLI runs the CLI in-process and returns its exit code and output.
func runCLI(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestRun_usageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string // in stderr
	}{
		{nil, "Usage:"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"decide"}, "at least one -d NAME=VALUE is required"},
		{[]string{"decide", "-d", "tenant"}, `want NAME=VALUE, got "tenant"`},
		{[]string{"decide", "-d", "=x"}, `want NAME=VALUE, got "=x"`},
		{[]string{"decide", "-d", "a=1", "-d", "a=2"}, `descriptor "a" given twice`},
		{[]string{"decide", "-d", "a=1", "--cost", "-3"}, "negative --cost -3"},
		{[]string{"decide", "-d", "a=1", "--cost", "many"}, `invalid value "many" for flag -cost`},
		{[]string{"decide", "-d", "a=1", "stray"}, `unexpected argument "stray"`},
		{[]string{"bench", "--mode", "sideways"}, `--mode must be closed or open, got "sideways"`},
		{[]string{"bench", "--workers", "0"}, "--workers must be at least 1"},
		{[]string{"bench", "--mode", "open", "--rate", "0"}, "--rate must be positive"},
		{[]string{"bench", "--duration", "0s"}, "--duration must be positive"},
		{[]string{"bench", "--hot", "1.5"}, "--hot must be in [0, 1]"},
		{[]string{"bench", "--keys", "0"}, "--keys must be in"},
		{[]string{"bench", "--batch", "0"}, "--batch must be at least 1"},
		{[]string{"bench", "--conns", "0"}, "--conns must be at least 1"},
		{[]string{"bench", "--desc", "oops"}, `want NAME=VALUE, got "oops"`},
		{[]string{"bench", "--no-such-flag"}, "flag provided but not defined: -no-such-flag"},
		{[]string{"policy"}, "want the subcommand check"},
		{[]string{"policy", "check"}, "want exactly one FILE"},
		{[]string{"policy", "check", "a", "b"}, "want exactly one FILE"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, stderr := runCLI(t.Context(), tt.args...)
			if code != exitError {
				t.Errorf("exit code %d, want %d", code, exitError)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr %q does not contain %q", stderr, tt.want)
			}
		})
	}
}

func TestRun_help(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"decide", "-h"}, {"bench", "--help"}, {"policy", "check", "-h"}} {
		if code, _, _ := runCLI(t.Context(), args...); code != exitOK {
			t.Errorf("%v: exit code %d, want 0", args, code)
		}
	}
}

func TestRunPolicy_check(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	write := func(path, body string) {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(good, `version: "v9"
limits:
  - name: per-user
    match: [tenant, user]
    rate: 5/s
    burst: 3
  - name: audit
    match: [tenant]
    rate: 100/s
    burst: 50
    shadow: true
  - name: cheap
    match: [tenant, route]
    rate: 10/s
    burst: 10
    on_failure: open
  - name: spend
    match: [tenant, item]
    rate: 10/s
    burst: 10
    on_failure: local
    fallback_rate: 4/s
    fallback_burst: 2
`)
	write(bad, "version: v1\nlimits:\n  - name: broken\n    rate: often\n")

	code, stdout, stderr := runCLI(t.Context(), "policy", "check", good)
	if code != exitOK {
		t.Fatalf("good policy: exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{"ok: version v9, 4 limits\n", "per-user", "5/s", "burst 3", "enforced", "audit", "shadow",
		"on failure: local, this node's share (rate/N, burst/N)", "on failure: open", "on failure: local, 4/s burst 2",
		"warning: limit \"cheap\" fails open"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output %q lacks %q", stdout, want)
		}
	}
	if n := strings.Count(stdout, "warning:"); n != 1 {
		t.Errorf("%d warnings, want 1 (only cheap fails open):\n%s", n, stdout)
	}
	if code, stdout, stderr := runCLI(t.Context(), "policy", "check", bad); code != exitNo || stdout != "" || !strings.Contains(stderr, "bad.yaml") {
		t.Errorf("bad policy: exit %d, stdout %q, stderr %q; want 1 and an error naming the file", code, stdout, stderr)
	}
	if code, _, _ := runCLI(t.Context(), "policy", "check", filepath.Join(dir, "missing.yaml")); code != exitNo {
		t.Errorf("missing file: exit %d, want 1", code)
	}
}

// TestRunPolicy_globalLimitFallback: the check says a global limit's local
// fallback is capped at the region's floor, and refuses one failing open.
func TestRunPolicy_globalLimitFallback(t *testing.T) {
	path := filepath.Join(t.TempDir(), "global.yaml")
	src := "version: v1\nlimits:\n  - {name: world, match: [tenant], rate: 100/s, burst: 50, scope: global}\n"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t.Context(), "policy", "check", path)
	if code != exitOK || !strings.Contains(stdout, "on failure: local, this node's share (rate/N, burst/N), at most this node's share of its region's floor with regions") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want ok and the fallback capped at the region's floor", code, stdout, stderr)
	}
	open := "version: v1\nlimits:\n  - {name: world, match: [tenant], rate: 100/s, burst: 50, scope: global, on_failure: open}\n"
	if err := os.WriteFile(path, []byte(open), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t.Context(), "policy", "check", path); code != exitNo || !strings.Contains(stderr, "on_failure: open cannot be used on a scope: global limit") {
		t.Fatalf("open on a global limit: exit %d, stderr %q; want it refused", code, stderr)
	}
}

func TestRunPolicy_concurrencyLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobs.yaml")
	src := "version: v1\nlimits:\n  - {name: jobs, kind: concurrency, match: [tenant], max_in_flight: 20, ttl: 1m}\n"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t.Context(), "policy", "check", path)
	if code != exitOK || !strings.Contains(stdout, "jobs  max_in_flight 20  ttl 1m0s  enforced  fast  on failure: closed") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want ok and the permit bound, failing closed", code, stdout, stderr)
	}
}

func TestRunPolicy_leaseWarnings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lease.yaml")
	src := "version: v1\nlimits:\n  - name: hot\n    match: [tenant]\n    rate: 1000/s\n    burst: 20\n    on_failure: closed\n    lease: {max: 10, ttl: 250ms}\n"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t.Context(), "policy", "check", path)
	if code != exitOK || strings.Contains(stdout, "warning:") || !strings.Contains(stdout, "leased (max 10, ttl 250ms)") {
		t.Fatalf("3 nodes: exit %d, stdout %q, stderr %q; want ok, the terms and no warning (20 >= 4 x 3)", code, stdout, stderr)
	}
	code, stdout, _ = runCLI(t.Context(), "policy", "check", "--nodes", "6", path)
	if code != exitOK || !strings.Contains(stdout, `warning: limit "hot" (burst 20): not leased with 6 nodes`) {
		t.Fatalf("6 nodes: exit %d, stdout %q; want a warning that burst 20 < 4 x 6", code, stdout)
	}
	if code, _, stderr := runCLI(t.Context(), "policy", "check", "--nodes", "0", path); code != exitError || !strings.Contains(stderr, "--nodes") {
		t.Errorf("--nodes 0: exit %d, stderr %q; want a usage error", code, stderr)
	}
}
