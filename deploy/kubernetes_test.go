package deploy

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/weirhq/weir/limiter"
	"github.com/weirhq/weir/policy"
	"github.com/weirhq/weir/server"
)

// newObject returns an empty object of the manifest's kind, or nil.
func newObject(apiVersion, kind string) any {
	switch apiVersion + " " + kind {
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}
	case "v1 Service":
		return &corev1.Service{}
	case "apps/v1 StatefulSet":
		return &appsv1.StatefulSet{}
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}
	}
	return nil
}

// yamlDocs splits a file into its YAML documents, each as plain Go values.
func yamlDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []map[string]any
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
}

// strictDecode decodes doc into obj, refusing unknown fields, and then
// checks that every field of doc survives a round trip with its exact
// spelling: encoding/json matches names case-insensitively, so a
// "Replicas" typo would otherwise pass.
func strictDecode(doc map[string]any, obj any) error {
	raw, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(obj); err != nil {
		return err
	}
	back, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	var round map[string]any
	if err := json.Unmarshal(back, &round); err != nil {
		return err
	}
	var in map[string]any
	if err := json.Unmarshal(raw, &in); err != nil {
		return err
	}
	if lost := lostFields(in, round, ""); len(lost) > 0 {
		return fmt.Errorf("fields not understood as written: %s", strings.Join(lost, ", "))
	}
	return nil
}

// lostFields lists the paths of in whose non-zero values are not in out
// under exactly the same name.
func lostFields(in, out any, path string) []string {
	var lost []string
	switch iv := in.(type) {
	case map[string]any:
		ov, _ := out.(map[string]any)
		for k, v := range iv {
			o, ok := ov[k]
			if !ok {
				if !isZero(v) {
					lost = append(lost, path+"."+k)
				}
				continue
			}
			lost = append(lost, lostFields(v, o, path+"."+k)...)
		}
	case []any:
		ov, _ := out.([]any)
		for i, v := range iv {
			if i < len(ov) {
				lost = append(lost, lostFields(v, ov[i], fmt.Sprintf("%s[%d]", path, i))...)
			}
		}
	}
	return lost
}

func isZero(v any) bool { return v == nil || reflect.ValueOf(v).IsZero() }

// manifests decodes every manifest under kubernetes/ by kind.
func manifests(t *testing.T) map[string][]any {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("kubernetes", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	out := map[string][]any{}
	for _, p := range paths {
		for i, doc := range yamlDocs(t, p) {
			apiVersion, _ := doc["apiVersion"].(string)
			kind, _ := doc["kind"].(string)
			obj := newObject(apiVersion, kind)
			if obj == nil {
				t.Errorf("%s document %d: unexpected %s %s", p, i, apiVersion, kind)
				continue
			}
			if err := strictDecode(doc, obj); err != nil {
				t.Errorf("%s document %d (%s): %v", p, i, kind, err)
				continue
			}
			out[kind] = append(out[kind], obj)
		}
	}
	return out
}

func TestKubernetes_manifestsDecodeStrictly(t *testing.T) {
	m := manifests(t)
	for _, kind := range []string{"ConfigMap", "Service", "StatefulSet", "Deployment", "PodDisruptionBudget"} {
		if len(m[kind]) == 0 {
			t.Errorf("no %s", kind)
		}
	}
}

func TestStrictDecode_catchesTypos(t *testing.T) {
	for _, doc := range []map[string]any{
		{"apiVersion": "v1", "kind": "Service", "spec": map[string]any{"clusterIp": "None"}},
		{"apiVersion": "v1", "kind": "Service", "spec": map[string]any{"ClusterIP": "None"}},
		{"apiVersion": "v1", "kind": "Service", "spec": map[string]any{"ports": "8080"}},
	} {
		if err := strictDecode(doc, &corev1.Service{}); err == nil {
			t.Errorf("%v decoded without error", doc)
		}
	}
}

func TestKubernetes_statefulSetIsWired(t *testing.T) {
	m := manifests(t)
	services := map[string]*corev1.Service{}
	for _, o := range m["Service"] {
		s := o.(*corev1.Service)
		services[s.Name] = s
	}
	var sts *appsv1.StatefulSet
	for _, o := range m["StatefulSet"] {
		sts = o.(*appsv1.StatefulSet)
	}
	if sts == nil {
		t.Fatal("no StatefulSet")
	}
	gossip := services[sts.Spec.ServiceName]
	if gossip == nil || gossip.Spec.ClusterIP != corev1.ClusterIPNone || !gossip.Spec.PublishNotReadyAddresses {
		t.Errorf("serviceName %q must be a headless Service publishing not-ready addresses", sts.Spec.ServiceName)
	}
	labels := sts.Spec.Template.Labels
	for name, s := range services {
		if strings.HasPrefix(name, "weir") && !subset(s.Spec.Selector, labels) {
			t.Errorf("Service %s selects %v, not the weir pods %v", name, s.Spec.Selector, labels)
		}
	}
	if !subset(sts.Spec.Selector.MatchLabels, labels) {
		t.Error("the StatefulSet's selector does not match its pods")
	}
	for _, o := range m["PodDisruptionBudget"] {
		if pdb := o.(*policyv1.PodDisruptionBudget); !subset(pdb.Spec.Selector.MatchLabels, labels) {
			t.Error("the PodDisruptionBudget does not select the weir pods")
		}
	}
	c := sts.Spec.Template.Spec.Containers[0]
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
		t.Error("readiness is not /readyz")
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
		t.Error("no preStop")
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Error("resources are not set")
	}
	checkRestricted(t, sts.Spec.Template.Spec, c)
	for _, want := range []string{"--policy=/etc/weir/policy/policy.yaml", "--node-name=$(POD_NAME)", "--peer-addr=0.0.0.0:8082", "--admin-addr=0.0.0.0:8092"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args lack %s", want)
		}
	}
}

// checkRestricted checks the Pod Security Standard "restricted" fields.
func checkRestricted(t *testing.T, pod corev1.PodSpec, c corev1.Container) {
	t.Helper()
	psc, sc := pod.SecurityContext, c.SecurityContext
	switch {
	case psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot:
		t.Error("runAsNonRoot is not set")
	case psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Error("seccompProfile is not RuntimeDefault")
	case sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("allowPrivilegeEscalation is not false")
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}):
		t.Error("capabilities are not dropped")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("the root filesystem is writable")
	}
}

func subset(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func TestPolicies_load(t *testing.T) {
	if _, err := policy.LoadFile("policy.yaml"); err != nil {
		t.Error(err)
	}
	for _, o := range manifests(t)["ConfigMap"] {
		cm := o.(*corev1.ConfigMap)
		if _, err := policy.Parse(cm.Name, []byte(cm.Data["policy.yaml"])); err != nil {
			t.Errorf("ConfigMap %s: %v", cm.Name, err)
		}
	}
}

// weirContainer returns the StatefulSet's weir container and its pod.
func weirContainer(t *testing.T, m map[string][]any) (*appsv1.StatefulSet, corev1.Container) {
	t.Helper()
	for _, o := range m["StatefulSet"] {
		sts := o.(*appsv1.StatefulSet)
		for _, c := range sts.Spec.Template.Spec.Containers {
			if strings.HasPrefix(c.Image, "weir") {
				return sts, c
			}
		}
	}
	t.Fatal("no StatefulSet with a weir container")
	return nil, corev1.Container{}
}

// listenPorts maps each --*-addr flag of args to its port: the node's
// listeners and --advertise-addr; --redis-addr is dialed, not listened on.
func listenPorts(t *testing.T, args []string) map[string]int32 {
	t.Helper()
	out := map[string]int32{}
	for _, a := range args {
		name, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok || !strings.HasSuffix(name, "-addr") || strings.HasPrefix(name, "redis") || v == "" {
			continue
		}
		_, port, err := net.SplitHostPort(v)
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		p, err := strconv.ParseInt(port, 10, 32)
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		out[name] = int32(p)
	}
	return out
}

// containerPortOf resolves a probe's or Service's port (a number or a
// name) against c's declared ports; 0 when it names none.
func containerPortOf(c corev1.Container, p intstr.IntOrString, proto corev1.Protocol) int32 {
	for _, cp := range c.Ports {
		if cp.Protocol != proto && !(proto == "" && cp.Protocol == corev1.ProtocolTCP) {
			continue
		}
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp.ContainerPort
		}
	}
	return 0
}

// TestKubernetes_portsMatchTheNodeFlags: every port the weir container
// declares is one its flags listen on (TCP, and UDP for gossip), every
// listener is declared, and the advertised gossip port is the bound one.
func TestKubernetes_portsMatchTheNodeFlags(t *testing.T) {
	_, c := weirContainer(t, manifests(t))
	flags := listenPorts(t, c.Args)
	byFlag := map[string]string{"http-addr": "http", "grpc-addr": "grpc", "peer-addr": "peer", "admin-addr": "admin", "gossip-addr": "gossip-tcp"}
	for flag, port := range flags {
		if flag == "advertise-addr" {
			if port != flags["gossip-addr"] {
				t.Errorf("--advertise-addr port %d is not --gossip-addr's %d", port, flags["gossip-addr"])
			}
			continue
		}
		name, ok := byFlag[flag]
		if !ok {
			t.Errorf("--%s listens on %d: the test does not know its port name", flag, port)
			continue
		}
		if got := containerPortOf(c, intstr.FromString(name), corev1.ProtocolTCP); got != port {
			t.Errorf("--%s listens on %d, but port %q is %d", flag, port, name, got)
		}
	}
	if got := containerPortOf(c, intstr.FromString("gossip-udp"), corev1.ProtocolUDP); got != flags["gossip-addr"] {
		t.Errorf("gossip-udp is %d, --gossip-addr listens on %d (memberlist uses UDP and TCP)", got, flags["gossip-addr"])
	}
	for _, cp := range c.Ports {
		if !slices.Contains(slices.Collect(maps.Values(flags)), cp.ContainerPort) {
			t.Errorf("port %s (%d) is not one the node listens on", cp.Name, cp.ContainerPort)
		}
	}
}

// nopDecider allows everything: the probes and /metrics never ask it.
type nopDecider struct{}

func (nopDecider) Decide(context.Context, limiter.Request) (limiter.Decision, error) {
	return limiter.Decision{Allowed: true}, nil
}

func (nopDecider) DecideBatch(_ context.Context, rs []limiter.Request) ([]limiter.Decision, error) {
	return make([]limiter.Decision, len(rs)), nil
}

// probe answers path on the node's own HTTP handler, ready or not.
func probe(t *testing.T, path string, ready bool) int {
	t.Helper()
	readiness := func() error {
		if !ready {
			return errors.New("redis clock not synced")
		}
		return nil
	}
	h := server.NewHTTPHandler(server.DefaultHTTPConfig(), nopDecider{}, prometheus.NewRegistry(), readiness, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code
}

// TestKubernetes_probesAndScrapeMatchWhatTheNodeServes: the probes and the
// Prometheus annotations reach the --http-addr port and paths the node's
// HTTP handler serves; readiness follows the node's readiness and liveness
// does not (a node waiting for Redis must not be restarted).
func TestKubernetes_probesAndScrapeMatchWhatTheNodeServes(t *testing.T) {
	sts, c := weirContainer(t, manifests(t))
	httpPort := listenPorts(t, c.Args)["http-addr"]
	for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("no HTTP %s probe", name)
			continue
		}
		if got := containerPortOf(c, p.HTTPGet.Port, corev1.ProtocolTCP); got != httpPort {
			t.Errorf("%s probe port %s is %d, not --http-addr's %d", name, p.HTTPGet.Port.String(), got, httpPort)
		}
		if code := probe(t, p.HTTPGet.Path, true); code != http.StatusOK {
			t.Errorf("%s probe %s: the node answers %d when ready", name, p.HTTPGet.Path, code)
		}
	}
	if p := c.ReadinessProbe; p != nil && p.HTTPGet != nil && probe(t, p.HTTPGet.Path, false) != http.StatusServiceUnavailable {
		t.Errorf("readiness probe %s does not fail while the node is not ready", p.HTTPGet.Path)
	}
	if p := c.LivenessProbe; p != nil && p.HTTPGet != nil && probe(t, p.HTTPGet.Path, false) != http.StatusOK {
		t.Errorf("liveness probe %s fails while the node is only not ready: pods would restart in a Redis outage", p.HTTPGet.Path)
	}
	ann := sts.Spec.Template.Annotations
	if ann["prometheus.io/port"] != strconv.Itoa(int(httpPort)) {
		t.Errorf("prometheus.io/port %q, want --http-addr's %d", ann["prometheus.io/port"], httpPort)
	}
	if path := cmp.Or(ann["prometheus.io/path"], "/metrics"); probe(t, path, true) != http.StatusOK {
		t.Errorf("the scrape path %s is not served", path)
	}
}

// TestKubernetes_servicesReachDeclaredPorts: every Service port of the
// weir Services targets a port the weir container declares, by the same
// protocol.
func TestKubernetes_servicesReachDeclaredPorts(t *testing.T) {
	m := manifests(t)
	sts, c := weirContainer(t, m)
	for _, o := range m["Service"] {
		s := o.(*corev1.Service)
		if !subset(s.Spec.Selector, sts.Spec.Template.Labels) {
			continue // not a weir Service (redis)
		}
		for _, p := range s.Spec.Ports {
			target := p.TargetPort
			if target.Type == intstr.Int && target.IntVal == 0 {
				target = intstr.FromInt32(p.Port)
			}
			if containerPortOf(c, target, p.Protocol) == 0 {
				t.Errorf("Service %s port %s targets %s/%s, which the weir container does not declare", s.Name, p.Name, target.String(), p.Protocol)
			}
		}
	}
}
