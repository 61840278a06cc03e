// Package containertest runs weir's deployment files under a real container
// engine: it builds local stand-ins for the base images
// (deploy/images/build-stand-ins.sh), builds the node image from
// deploy/Dockerfile with `podman build --pull=never`, runs it, and brings
// deploy/compose.yaml up with podman-compose to check the cluster, the
// Prometheus scrape and every Grafana dashboard query against real nodes.
//
// The tests run only with WEIR_TEST_DEPLOY=1 (`make test-deploy` sets it),
// as root, with podman, buildah and podman-compose installed and the host's
// Go module cache filled (`go mod download`; the image build mounts it and
// sets GOPROXY=off). Without WEIR_TEST_DEPLOY they skip, so `make test`
// does not run them; with it and CI set, a missing engine is a failure,
// not a skip. See docs/operations.md, "Testing the deployment files".
//
// The package has no Go API.
package containertest
