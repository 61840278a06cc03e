package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPolicyCheck_regions: with --regions, a strict global limit whose
// burst is below the number of regions is refused (exit 1, the limit and
// the fix named), a fast one is accepted with a warning, and without
// --regions neither is checked.
func TestPolicyCheck_regions(t *testing.T) {
	file := func(consistency string) string {
		p := filepath.Join(t.TempDir(), "p.yaml")
		src := "version: v1\nlimits:\n  - {name: glob, match: [tenant, g], group: tenant, rate: 100/s, burst: 2, scope: global, consistency: " + consistency + "}\n"
		if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	strict, fast := file("strict"), file("fast")
	if code, _, stderr := runCLI(t.Context(), "policy", "check", "--regions", "3", strict); code != exitNo || !strings.Contains(stderr, `limit "glob"`) || !strings.Contains(stderr, "raise burst to at least 3") {
		t.Fatalf("strict burst 2 over 3 regions: exit %d, stderr %q; want 1 naming the limit and the fix", code, stderr)
	}
	if code, stdout, _ := runCLI(t.Context(), "policy", "check", "--regions", "3", fast); code != exitOK || !strings.Contains(stdout, `warning: limit "glob": burst 2 is below the 3 regions`) {
		t.Fatalf("fast burst 2 over 3 regions: exit %d, stdout %q; want 0 and a warning", code, stdout)
	}
	if code, stdout, _ := runCLI(t.Context(), "policy", "check", strict); code != exitOK || strings.Contains(stdout, "warning") {
		t.Fatalf("no --regions: exit %d, stdout %q; want 0, no warning", code, stdout)
	}
	if code, _, stderr := runCLI(t.Context(), "policy", "check", "--regions", "2", "--region-floor", "0.6", fast); code != exitError || !strings.Contains(stderr, "--region-floor") {
		t.Fatalf("a floor over 1/2: exit %d, stderr %q; want a usage error naming the flag", code, stderr)
	}
}
