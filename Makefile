# weir — see README.md. `make test` is the one command that runs every test.
GO        ?= go
GOBIN     ?= $(shell $(GO) env GOPATH)/bin
PROTOC    ?= protoc
PROTO_GEN_GO_VERSION   ?= v1.36.12
PROTO_GEN_GRPC_VERSION ?= v1.6.0
TESTFLAGS ?= -race -count=1 -timeout 20m

.PHONY: all build test test-short test-deploy vet fmt proto tools check-deps bench chaos chaos-hotkey

all: build

build:
	$(GO) build ./...

# test runs every test with the race detector. The Redis tests start their
# own redis-server processes on free ports, so redis-server must be on PATH.
# The chaos short suite (package chaos: real nodes in network namespaces,
# root, iproute2 and nftables) runs last and alone, so the other packages'
# tests do not share the two cores with its timed phases.
test: check-deps vet
	$(GO) test $(TESTFLAGS) $$($(GO) list ./... | grep -v '/chaos$$')
	$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME_SHORT)
	$(GO) test $(TESTFLAGS) ./chaos/

# test-deploy runs deploy/ under a real container engine (root, podman,
# buildah, podman-compose; see deploy/containertest): stand-in base images,
# the node image from deploy/Dockerfile, the compose cluster, Prometheus and
# every dashboard query. Not part of `make test`; .ci/run runs it after.
test-deploy:
	WEIR_TEST_DEPLOY=1 $(GO) test -count=1 -timeout 40m -v ./deploy/containertest/

test-short:
	$(GO) test -short -count=1 ./...

check-deps:
	@command -v redis-server >/dev/null 2>&1 || { \
	  echo "redis-server is missing: the tests start real Redis processes."; \
	  echo "Install it with: sudo apt-get update && sudo apt-get install -y redis-server"; \
	  exit 1; }
	@command -v redis-cli >/dev/null 2>&1 || { \
	  echo "redis-cli is missing (needed to build the test Redis Cluster)."; \
	  echo "Install it with: sudo apt-get update && sudo apt-get install -y redis-tools"; \
	  exit 1; }

vet:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

tools:
	$(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTO_GEN_GO_VERSION)
	$(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTO_GEN_GRPC_VERSION)

# proto regenerates the committed Go code from api/**/*.proto. Needs protoc
# (Debian: protobuf-compiler) and the plugins from `make tools`.
proto: tools
	PATH="$(GOBIN):$$PATH" $(PROTOC) -I . -I /usr/include \
	  --go_out=. --go_opt=paths=source_relative \
	  --go-grpc_out=. --go-grpc_opt=paths=source_relative \
	  $$(find api -name '*.proto')

# chaos runs every nemesis against a 3-node cluster (root, iproute2,
# nftables, redis-server) and prints the summary table; histories, logs,
# plots and report.md go to chaos-results/. See docs/chaos.md.
chaos:
	$(GO) build -o bin/node ./cmd/node
	$(GO) build -o bin/weir-chaos ./cmd/weir-chaos
	./bin/weir-chaos run -suite full -node-bin bin/node -out chaos-results

# Issue 10's hot-key runs alone (idle, CPU hogs, hogs + rotating stalls).
chaos-hotkey:
	$(GO) build -o bin/node ./cmd/node
	$(GO) build -o bin/weir-chaos ./cmd/weir-chaos
	./bin/weir-chaos run -suite hotkey -node-bin bin/node -out chaos-results/hotkey

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./gcra/ ./redisbackend/

# bench-peers builds weir's node, gubernator and envoyproxy/ratelimit (from
# their published modules, in bench/peers/, a module of its own so their
# dependencies stay out of go.mod), runs each on free loopback ports with the
# same client and workloads, and rewrites the peers section of
# docs/benchmarks.md. Needs redis-server; takes about 5 minutes plus the
# first build. Not part of `make test` or CI. BENCH_PEERS_FLAGS passes
# flags, e.g. BENCH_PEERS_FLAGS='-runs 3 -only weir'.
BENCH_PEERS_FLAGS ?=
.PHONY: bench-peers
bench-peers: check-deps
	cd bench/peers && $(GO) run . -repo ../.. -bin bin -doc ../../docs/benchmarks.md $(BENCH_PEERS_FLAGS)

# FUZZ_TARGETS lists every fuzz target as package:Name. `make fuzz` runs
# each for FUZZTIME; `make test` runs each for FUZZTIME_SHORT. Inputs that
# fail are written under the package's testdata/fuzz/ and then replayed by
# every plain `go test`.
FUZZ_TARGETS = ./server:FuzzCodec_DecideRequest ./server:FuzzHTTP_decide \
  ./server:FuzzDecode_DecideRequest ./server:FuzzDecode_DecideBatchRequest ./server:FuzzEncode_BatchResponse \
  ./policy:FuzzParse ./policy:FuzzParamsForKey ./intake:FuzzValidator ./peer:FuzzCodec_DecideBatch ./gcra:FuzzDecide
FUZZTIME       ?= 60s
FUZZTIME_SHORT ?= 1000x

.PHONY: fuzz
# fuzz runs every fuzz target in FUZZ_TARGETS for FUZZTIME (default 60s
# each), one after another: `make fuzz FUZZTIME=10m` for a longer hunt.
# make test runs 1000 inputs each (FUZZTIME_SHORT), a count rather than a
# time: a time limit that ends while a worker runs a slow input on a
# loaded machine fails with "context deadline exceeded" though nothing
# was found (seen in CI on FuzzDecode_DecideBatchRequest).
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; name=$${t##*:}; \
	  echo "fuzz $$pkg $$name for $(FUZZTIME)"; \
	  $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done
