package policy

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/weirhq/weir/region"
)

func globalYAML(version string, burst int, consistency string) string {
	return "version: " + version + "\nlimits:\n  - {name: glob, match: [tenant, g], group: tenant, rate: 100/s, burst: " +
		strconv.Itoa(burst) + ", scope: global, consistency: " + consistency + "}\n" +
		"  - {name: plain, match: [tenant], group: tenant, rate: 5/s, burst: 1, consistency: " + consistency + "}\n"
}

// TestPolicy_RegionWarnings_refusesLimitsThatAdmitNothing: with the
// default region settings, a fast global burst of 2 over three regions
// still admits (in two regions at a time: a warning), a strict one, split
// in fixed thirds, admits nothing (an error naming the limit and the fix),
// and a burst of 3 gives every region's floor a unit (nothing to say).
// Regional limits are not checked.
func TestPolicy_RegionWarnings_refusesLimitsThatAdmitNothing(t *testing.T) {
	three := region.DefaultConfig("eu", "us", "ap")
	w, err := mustParse(t, globalYAML("v1", 2, "fast")).RegionWarnings(three)
	if err != nil || len(w) != 1 || !strings.Contains(w[0], `limit "glob": burst 2 is below the 3 regions`) || !strings.Contains(w[0], "at least 3") {
		t.Fatalf("fast burst 2 over 3 regions: warnings %q, err %v; want one warning naming the limit and the fix", w, err)
	}
	_, err = mustParse(t, globalYAML("v1", 2, "strict")).RegionWarnings(three)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `limit "glob"`) || !strings.Contains(err.Error(), "raise burst to at least 3") {
		t.Fatalf("strict burst 2 over 3 regions: %v; want ErrInvalid naming the limit and the fix", err)
	}
	if w, err := mustParse(t, globalYAML("v1", 3, "strict")).RegionWarnings(three); err != nil || len(w) != 0 {
		t.Fatalf("burst 3 over 3 regions: %q %v, want nothing", w, err)
	}
	half := region.DefaultConfig("eu", "us")
	half.Floor = region.Whole / 2
	_, err = mustParse(t, globalYAML("v1", 1, "fast")).RegionWarnings(half)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "--region-floor") {
		t.Fatalf("burst 1 over 2 regions with floors of a half: %v; want ErrInvalid naming --region-floor", err)
	}
}

// TestWatcher_Check_badPolicyChangesNothing: a policy the check refuses
// fails the start, and on reload leaves the previous one serving.
func TestWatcher_Check_badPolicyChangesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	three := region.DefaultConfig("eu", "us", "ap")
	cfg := WatcherConfig{Path: path, Check: func(p *Policy) ([]string, error) { return p.RegionWarnings(three) }}
	write(globalYAML("v0", 2, "strict"))
	if _, err := NewWatcher(cfg, nil, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("start with a refused policy: %v, want ErrInvalid", err)
	}
	write(globalYAML("v1", 3, "strict"))
	w, err := NewWatcher(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	write(globalYAML("v2", 2, "strict"))
	if err := w.Reload(); !errors.Is(err, ErrInvalid) || w.Current().Version != "v1" {
		t.Fatalf("reload of a refused policy: %v, active %s; want ErrInvalid and v1 still serving", err, w.Current().Version)
	}
	write(globalYAML("v3", 2, "fast")) // a warning only
	if err := w.Reload(); err != nil || w.Current().Version != "v3" {
		t.Fatalf("reload of a policy with a warning: %v, active %s; want v3", err, w.Current().Version)
	}
}
