package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirhq/weir/policy"
)

func TestRunImportEnvoy(t *testing.T) {
	data := func(name string) string { return filepath.Join("..", "..", "envoyimport", "testdata", name) }

	code, stdout, stderr := runCLI(t.Context(), "policy", "import-envoy", data("mongo_cps.yaml"))
	if code != exitOK {
		t.Fatalf("mongo_cps: exit %d, stderr %q", code, stderr)
	}
	p, err := policy.Parse("stdout", []byte(stdout))
	if err != nil {
		t.Fatalf("stdout is not a policy: %v\n%s", err, stdout)
	}
	if !p.HasDomain("mongo_cps") || len(p.Limits) != 2 {
		t.Errorf("policy has domains %v and %d limits", p.Domains(), len(p.Limits))
	}
	if !strings.Contains(stderr, "imported 2 limits from 1 files; fixed windows became GCRA") {
		t.Errorf("report = %q", stderr)
	}

	// Something left out: the policy is still written, the report says
	// what and why, and the exit status says so.
	code, stdout, stderr = runCLI(t.Context(), "policy", "import-envoy", data("edge_proxy.yaml"), data("istio_ingress.yaml"))
	if code != exitNo || !strings.Contains(stdout, "limits:") {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
	for _, want := range []string{"unmapped: ", "wildcard values are not supported", "calendar units", "changed: "} {
		if !strings.Contains(stderr, want) {
			t.Errorf("report lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stdout, "unmapped") {
		t.Error("the report leaked into the policy")
	}

	for _, args := range [][]string{{"policy", "import-envoy"}, {"policy", "import-envoy", "no-such-file.yaml"}} {
		if code, stdout, _ := runCLI(t.Context(), args...); code != exitError || stdout != "" {
			t.Errorf("%v: exit %d stdout %q, want 2 and nothing", args, code, stdout)
		}
	}
}
