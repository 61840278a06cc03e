package envoyimport

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weirhq/weir/policy"
)

var update = flag.Bool("update", false, "rewrite the golden policies in testdata")

func read(t *testing.T, names ...string) []File {
	t.Helper()
	var fs []File
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join("testdata", n))
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, File{Name: n, Data: data})
	}
	return fs
}

func TestConvert_golden(t *testing.T) {
	for _, name := range []string{"mongo_cps", "edge_proxy", "istio_ingress"} {
		t.Run(name, func(t *testing.T) {
			res, err := Convert(read(t, name+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			var notes strings.Builder
			for _, n := range res.Notes {
				notes.WriteString(n.String() + "\n")
			}
			got := string(res.Policy) + "\n# notes:\n# " + strings.ReplaceAll(strings.TrimSpace(notes.String()), "\n", "\n# ") + "\n"
			golden := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s (run with -update to accept):\n%s", golden, got)
			}
			if _, err := policy.Parse(name, res.Policy); err != nil {
				t.Fatalf("the policy does not load: %v", err)
			}
		})
	}
}

func TestConvert_edgeProxy(t *testing.T) {
	res, err := Convert(read(t, "edge_proxy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse("imported", res.Policy)
	if err != nil {
		t.Fatal(err)
	}
	wantNotes := []string{
		"ignored: edge_proxy.yaml: edge_proxy/api_key/path=/v1/search: detailed_metric",
		"unmapped: edge_proxy.yaml: edge_proxy/path=/v1/export*: wildcard values",
		"unmapped: edge_proxy.yaml: edge_proxy/tenant: calendar units",
		`unmapped: edge_proxy.yaml: edge_proxy/plan=premium: replaces "no_such_limit"`,
	}
	if len(res.Notes) != len(wantNotes) {
		t.Fatalf("notes = %v, want %d", res.Notes, len(wantNotes))
	}
	for i, w := range wantNotes {
		if !strings.HasPrefix(res.Notes[i].String(), w) {
			t.Errorf("notes[%d] = %q, want it to start with %q", i, res.Notes[i], w)
		}
	}
	if !res.Unmapped() || res.Limits != 6 {
		t.Errorf("Unmapped() = %v, Limits = %d; want true, 6", res.Unmapped(), res.Limits)
	}
	search := p.Limit("search_per_key")
	if search == nil || search.Envoy.Values["path"] != "/v1/search" || search.Group != "api_key" || search.Burst != 1000 || search.Rate.String() != "1000/h" {
		t.Errorf("search_per_key = %+v", search)
	}
	if prem := p.Limit("premium"); prem == nil || len(prem.Envoy.Replaces) != 1 || prem.Envoy.Replaces[0] != "search_per_key" {
		t.Errorf("premium = %+v", prem)
	}
}

func TestConvert_rejectsMalformedInput(t *testing.T) {
	tests := []struct{ name, data, want string }{
		{"no domain", "descriptors: [{key: a, rate_limit: {unit: second, requests_per_unit: 1}}]", "no domain"},
		{"unknown field", "domain: d\ndescriptors: [{key: a, rate: 5}]", "field rate not found"},
		{"no key", "domain: d\ndescriptors: [{value: a, rate_limit: {unit: second, requests_per_unit: 1}}]", "has no key"},
		{"no unit", "domain: d\ndescriptors: [{key: a, rate_limit: {requests_per_unit: 1}}]", "has no unit"},
		{"zero requests", "domain: d\ndescriptors: [{key: a, rate_limit: {unit: second, requests_per_unit: 0}}]", "must be positive"},
		{"bad unit", "domain: d\ndescriptors: [{key: a, rate_limit: {unit: fortnight, requests_per_unit: 1}}]", `unknown unit "fortnight"`},
		{"empty", "", "empty"},
		{"nothing mappable", "domain: d\ndescriptors: [{key: a, rate_limit: {unit: year, requests_per_unit: 1}}]", "no limit could be mapped"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Convert([]File{{Name: "c.yaml", Data: []byte(tt.data)}})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
	same := []File{{Name: "a.yaml", Data: []byte("domain: d\ndescriptors: [{key: a, rate_limit: {unit: second, requests_per_unit: 1}}]")}}
	same = append(same, File{Name: "b.yaml", Data: same[0].Data})
	if _, err := Convert(same); err == nil || !strings.Contains(err.Error(), `domain "d" is also in a.yaml`) {
		t.Fatalf("same domain twice: %v", err)
	}
}

func TestConvert_manyFilesAndNameClashes(t *testing.T) {
	res, err := Convert(read(t, "mongo_cps.yaml", "istio_ingress.yaml", "edge_proxy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse("imported", res.Policy)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(p.Domains(), ","); got != "edge_proxy,mongo_cps,ratelimit" {
		t.Errorf("domains = %s", got)
	}
	// Two rate_limits with one name: the second gets a derived one.
	twice := "domain: d\ndescriptors:\n  - {key: a, rate_limit: {name: x, unit: second, requests_per_unit: 1}}\n  - {key: b, rate_limit: {name: x, unit: second, requests_per_unit: 2}}\n"
	res, err = Convert([]File{{Name: "t.yaml", Data: []byte(twice)}})
	if err != nil {
		t.Fatal(err)
	}
	if p, err = policy.Parse("t", res.Policy); err != nil || p.Limit("x") == nil || p.Limit("d.b") == nil {
		t.Fatalf("names: %v\n%s", err, res.Policy)
	}
}
