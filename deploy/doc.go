// Package deploy holds weir's deployment files (container image, compose
// file, Kubernetes manifests, Envoy bootstrap, Prometheus rules and the
// Grafana dashboard) and the tests that check them without a container
// engine: every Kubernetes manifest decodes strictly into k8s.io/api types,
// the Envoy bootstrap decodes into go-control-plane's types and passes
// their validation, and the Envoy domain and descriptors it sends are
// answered by deploy/policy.yaml. That every metric the dashboard and the
// alert rules name is exported by a running node is tested in cmd/node.
//
// The package has no Go API.
package deploy
