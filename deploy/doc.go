// Package deploy holds weir's deployment files (container image, compose
// file, Kubernetes manifests, Envoy bootstrap, Prometheus rules and the
// Grafana dashboard) and the tests that check them without a container
// engine: every Kubernetes manifest decodes strictly into k8s.io/api types;
// the weir container's ports are the ones its flags listen on, its probes
// and Prometheus annotations reach paths the node's own HTTP handler
// serves (readiness failing while the node is not ready, liveness not),
// and every Service targets a declared port; the Envoy bootstrap decodes into go-control-plane's types and passes
// their validation, and the Envoy domain and descriptors it sends are
// answered by deploy/policy.yaml, and the alert rules pass their unit tests
// (prometheus/alerts_test.yaml, with promtool; every alert fires on a bad
// series and stays silent on a healthy one). That every metric the
// dashboard and the alert rules name is exported by a running node, and
// that every flag and WEIR_* variable the manifests and compose.yaml pass
// is accepted by the node's --check (its own parser, in process, with the
// mounted files in place), are tested in cmd/node. Package
// deploy/containertest (`make test-deploy`) runs the image, the compose
// file, Prometheus and the dashboard's queries under podman.
//
// The package has no Go API.
package deploy
