package main

import (
	"bytes"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/weirhq/weir/tlsfiles/tlstest"
)

// The node's flags as deploy/ passes them: every weir container of the
// Kubernetes manifests and of deploy/compose.yaml must pass --check with
// exactly its args and environment, its mounted files standing in place.
// (The test lives here, not in deploy/, because it runs the node's own
// parser and check in process; deploy/kubernetes_test.go checks the
// manifests' probes, ports and labels against what the node serves.)

// nodeFlagNames lists the flags of the node's real FlagSet, from its usage.
func nodeFlagNames(t *testing.T) []string {
	t.Helper()
	var usage bytes.Buffer
	if _, err := parseConfig([]string{"-h"}, envMap(), &usage); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^  -(\S+)`).FindAllStringSubmatch(usage.String(), -1) {
		names = append(names, m[1])
	}
	if len(names) < 20 {
		t.Fatalf("only %d flags in the usage:\n%s", len(names), usage.String())
	}
	return names
}

// deployContainer is one weir container of deploy/: its args, environment
// and mounts (container path -> host path).
type deployContainer struct {
	where  string
	args   []string
	env    map[string]string
	mounts map[string]string
	ip     string // the address its network gives it
}

// podFields are the values Kubernetes' downward API would give the pod.
var podFields = map[string]string{"metadata.name": "weir-0", "metadata.namespace": "default", "status.podIP": "10.244.1.7"}

func decodeYAMLDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []map[string]any
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			return docs
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
}

func asMap(v any) map[string]any { m, _ := v.(map[string]any); return m }
func asList(v any) []any         { l, _ := v.([]any); return l }
func asString(v any) string      { s, _ := v.(string); return s }

func asStrings(v any) []string {
	var out []string
	for _, x := range asList(v) {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

// kubeContainers returns every container of the manifests whose image is
// weir's, with its volumes written out under dir: ConfigMaps from the
// manifests, Secrets from secrets (name -> key -> content).
func kubeContainers(t *testing.T, dir string, secrets map[string]map[string]string) []deployContainer {
	t.Helper()
	paths, _ := filepath.Glob("../../deploy/kubernetes/*.yaml")
	var docs []map[string]any
	for _, p := range paths {
		docs = append(docs, decodeYAMLDocs(t, p)...)
	}
	configMaps := map[string]map[string]string{}
	for _, d := range docs {
		if d["kind"] == "ConfigMap" {
			data := map[string]string{}
			for k, v := range asMap(d["data"]) {
				data[k] = asString(v)
			}
			configMaps[asString(asMap(d["metadata"])["name"])] = data
		}
	}
	var out []deployContainer
	for _, d := range docs {
		pod := asMap(asMap(asMap(asMap(d["spec"])["template"])["spec"]))
		for _, c := range append(asList(pod["initContainers"]), asList(pod["containers"])...) {
			if c := asMap(c); strings.HasPrefix(asString(c["image"]), "weir") {
				where := fmt.Sprintf("%s %s container %s", d["kind"], asMap(d["metadata"])["name"], c["name"])
				out = append(out, kubeContainer(t, where, pod, c, filepath.Join(dir, fmt.Sprint(len(out))), configMaps, secrets))
			}
		}
	}
	return out
}

// kubeContainer reads container c of pod: its env (downward API values
// from podFields), its volumes written out under dir, its args with
// Kubernetes' $(VAR) expanded.
func kubeContainer(t *testing.T, where string, pod, c map[string]any, dir string, configMaps, secrets map[string]map[string]string) deployContainer {
	t.Helper()
	dc := deployContainer{where: where, env: map[string]string{}, mounts: map[string]string{}, ip: podFields["status.podIP"]}
	for _, e := range asList(c["env"]) {
		e := asMap(e)
		v := asString(e["value"])
		if ref := asMap(asMap(e["valueFrom"])["fieldRef"]); ref != nil {
			v = podFields[asString(ref["fieldPath"])]
		}
		dc.env[asString(e["name"])] = v
	}
	volumes := map[string]map[string]string{}
	for _, v := range asList(pod["volumes"]) {
		v := asMap(v)
		if cm := asMap(v["configMap"]); cm != nil {
			volumes[asString(v["name"])] = configMaps[asString(cm["name"])]
		} else if s := asMap(v["secret"]); s != nil {
			name := asString(s["secretName"])
			if secrets[name] == nil {
				t.Fatalf("%s: no test content for Secret %s: add it to the test", where, name)
			}
			volumes[asString(v["name"])] = secrets[name]
		}
	}
	for _, m := range asList(c["volumeMounts"]) {
		m := asMap(m)
		host := filepath.Join(dir, asString(m["name"]))
		writeVolume(t, host, volumes[asString(m["name"])])
		dc.mounts[asString(m["mountPath"])] = host
	}
	envVar := regexp.MustCompile(`\$\(([A-Z_][A-Z0-9_]*)\)`)
	for _, a := range asStrings(c["args"]) {
		dc.args = append(dc.args, envVar.ReplaceAllStringFunc(a, func(v string) string { return dc.env[v[2:len(v)-1]] }))
	}
	return dc
}

func writeVolume(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// composeContainers returns the weir services of deploy/compose.yaml, with
// their bind mounts relative to deploy/.
func composeContainers(t *testing.T) []deployContainer {
	t.Helper()
	docs := decodeYAMLDocs(t, "../../deploy/compose.yaml")
	var out []deployContainer
	for name, s := range asMap(docs[0]["services"]) {
		s := asMap(s)
		if !strings.HasPrefix(asString(s["image"]), "weir") {
			continue
		}
		dc := deployContainer{where: "compose service " + name, args: asStrings(s["command"]), env: map[string]string{}, mounts: map[string]string{}, ip: "10.89.0.5"}
		switch env := s["environment"].(type) {
		case map[string]any:
			for k, v := range env {
				dc.env[k] = fmt.Sprint(v)
			}
		case []any:
			for _, kv := range asStrings(env) {
				k, v, _ := strings.Cut(kv, "=")
				dc.env[k] = v
			}
		}
		for _, v := range asStrings(s["volumes"]) {
			parts := strings.Split(v, ":")
			if len(parts) >= 2 && strings.HasPrefix(parts[0], ".") {
				dc.mounts[parts[1]] = filepath.Join("../../deploy", parts[0])
			}
		}
		out = append(out, dc)
	}
	return out
}

// localPath maps a path inside the container to the file standing in for
// it, when a mount covers it.
func (c deployContainer) localPath(s string) string {
	for mount, host := range c.mounts {
		if s == mount || strings.HasPrefix(s, mount+"/") {
			return host + strings.TrimPrefix(s, mount)
		}
	}
	return s
}

// localArgs rewrites every --flag=PATH whose path a mount covers.
func (c deployContainer) localArgs() []string {
	var out []string
	for _, a := range c.args {
		if name, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(v, "/") {
			a = name + "=" + c.localPath(v)
		}
		out = append(out, a)
	}
	return out
}

func peerTLSSecret(t *testing.T) map[string]string {
	f := tlstest.NewCA(t, "weir-peer-ca").WriteFiles(t, t.TempDir(), "node", "weir-0", "10.244.1.7")
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	return map[string]string{"tls.crt": read(f.Cert), "tls.key": read(f.Key), "ca.crt": read(f.CA)}
}

func TestDeploy_everyManifestFlagAndEnvPassesCheck(t *testing.T) {
	secrets := map[string]map[string]string{
		// What statefulset.yaml's comment tells the operator to create.
		"weir-peer-tls":       peerTLSSecret(t),
		"weir-gossip-key":     {"key": base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))},
		"weir-redis-password": {"password": "test-redis-password"},
	}
	containers := append(kubeContainers(t, t.TempDir(), secrets), composeContainers(t)...)
	if len(containers) < 4 { // the StatefulSet's and compose's three
		t.Fatalf("found %d weir containers, want the StatefulSet's and compose's", len(containers))
	}
	flags := nodeFlagNames(t)
	for _, c := range containers {
		t.Run(c.where, func(t *testing.T) {
			if len(c.args) == 0 {
				t.Fatal("no args")
			}
			for _, a := range c.args {
				name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
				if !strings.HasPrefix(a, "--") || !slices.Contains(flags, name) {
					t.Errorf("argument %q is not a node flag", a)
				}
			}
			for k := range c.env {
				if name := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(k, "WEIR_"), "_", "-")); strings.HasPrefix(k, "WEIR_") && !slices.Contains(flags, name) {
					t.Errorf("environment %s names no node flag (the node would ignore it)", k)
				}
			}
			getenv := func(k string) string { return c.localPath(c.env[k]) }
			cfg, err := parseConfig(c.localArgs(), getenv, io.Discard)
			if err != nil {
				t.Fatalf("flags refused: %v\nargs %q", err, c.localArgs())
			}
			var out bytes.Buffer
			if err := check(cfg, (&fakeHost{private: []string{c.ip}}).src(), &out); err != nil {
				t.Fatalf("--check: %v\nargs %q", err, c.localArgs())
			}
			if !strings.Contains(out.String(), "peer "+c.ip+":") {
				t.Errorf("the peer address others forward to is not this container's IP %s:\n%s", c.ip, out.String())
			}
			t.Logf("%s", out.String())
		})
	}
}
