package deploy

import (
	"os"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestCompose_filesAndServices checks what can be checked without a
// container engine: the services are there, every file mounted from the
// repository exists, and Prometheus scrapes every weir node.
func TestCompose_filesAndServices(t *testing.T) {
	data, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Volumes []string `yaml:"volumes"`
			Command []string `yaml:"command"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &compose); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"weir-1", "weir-2", "weir-3", "redis", "prometheus", "grafana"} {
		if _, ok := compose.Services[want]; !ok {
			t.Errorf("no service %s", want)
		}
	}
	var weirs []string
	for name, s := range compose.Services {
		if strings.HasPrefix(name, "weir-") {
			weirs = append(weirs, name+":8080")
			if !slices.Contains(s.Command, "--policy=/etc/weir/policy.yaml") {
				t.Errorf("%s: no --policy", name)
			}
		}
		for _, v := range s.Volumes {
			host := strings.SplitN(v, ":", 2)[0]
			if _, err := os.Stat(host); err != nil {
				t.Errorf("%s mounts %s: %v", name, host, err)
			}
		}
	}
	prom, err := os.ReadFile("prometheus/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range weirs {
		if !strings.Contains(string(prom), `"`+target+`"`) {
			t.Errorf("prometheus.yml does not scrape %s", target)
		}
	}
}
