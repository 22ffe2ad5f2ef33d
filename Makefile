# Switchyard's front door. `make demo` and `make test` work on a fresh Debian
# machine as root: they install what they need first (Debian packages via
# apt-get, Go tools at pinned versions into ./bin).

SHELL := /bin/bash
export GOTOOLCHAIN := local
export GOFLAGS := -buildvcs=false

BIN := $(CURDIR)/bin
GO ?= go

# Pinned tool versions.
STATICCHECK_VERSION    := v0.8.2
PROTOC_GEN_GO_VERSION  := v1.36.12
PROTOC_GEN_GRPC_VERSION := v1.6.0
PROTOC_VERSION         := 3.21.12

# Integration packages start real OVS, namespaces and apiservers; two at a
# time is what a 2-core machine sustains without starving them.
TEST_P ?= 2
TEST_TIMEOUT ?= 40m
BENCH_COUNT ?= 5

# The tag of the images `make images` builds and `make manifests` names;
# override it for a build of your own: make images VERSION=0.1.1-rc1.
VERSION ?= $(shell cat manifests/VERSION)

.PHONY: all build deps tools tools-bench test unit itest bench lint proto generate verify demo demo-kubelet clean-itest clean help images manifests

all: build

help:
	@echo "make demo        bring up a local multi-node cluster and print its connectivity"
	@echo "make demo-kubelet  the same with real kubelet + containerd nodes"
	@echo "make test        install dependencies and run every test (unit + integration)"
	@echo "make bench       run the benchmarks (medians over BENCH_COUNT runs); builds kube-proxy first (make tools-bench)"
	@echo "make lint        go vet + staticcheck"
	@echo "make generate    regenerate protobuf, CRD and OVSDB model code;  make verify  checks it is current"
	@echo "make images      build the image archives into bin/images (VERSION=$(VERSION))"
	@echo "make manifests   render manifests/switchyard.yml, the one-file install"
	@echo "make clean-itest remove namespaces, processes and dirs left by a crashed run"

deps:
	@bash itest/scripts/deps.sh

# Upstream tools, each group cached per machine: kube-apiserver and etcd
# (itest/tools), kubelet, kube-scheduler, kube-controller-manager and agnhost
# (itest/tools/kube), containerd v2, and the reference CNI plugins.
tools:
	@$(GO) run ./itest/upstream/cmd/ensure-tools >/dev/null

# What only the benchmarks run: kube-proxy (itest/tools/kube with
# kube-proxy.mod), the service benchmark's nftables baseline. Not part of
# `make tools`, so `make test` never builds it.
tools-bench:
	@$(GO) run ./itest/upstream/cmd/ensure-tools -bench >/dev/null

build:
	$(GO) build ./...
	cd sdk && $(GO) build ./...

# No clean-itest here: runs are named uniquely, so a concurrent run's
# namespaces and daemons must be left alone. Use `make clean-itest` by hand.
RACE_PKGS = ./host/agent/ ./host/flowstore/ ./host/cniserver/ ./host/ifstore/ ./host/openflow/

test: deps tools
	$(GO) vet ./...
	cd sdk && $(GO) vet ./... && $(GO) test -count=1 ./...
# The template's own module: SDK-only deps, the fake host, and a real
# switch through itest/kit (needs root and OVS, like the itests).
	cd plugins/template && $(GO) vet ./... && $(GO) test -count=1 ./...
# The host's shared state (flow store, records, switch connection) under
# the race detector: its unit tests run plugins' batches side by side.
	$(GO) test -race -count=1 $(RACE_PKGS)
	$(GO) test -count=1 -p $(TEST_P) -timeout $(TEST_TIMEOUT) ./...

unit:
	$(GO) test -short ./host/... ./controller/... ./cni/... ./plugins/...
	cd sdk && $(GO) test ./...

itest: deps tools
	$(GO) test -count=1 -p $(TEST_P) -timeout $(TEST_TIMEOUT) ./itest/...

bench: deps tools tools-bench
	bash itest/scripts/bench.sh $(BENCH_COUNT)

$(BIN)/staticcheck:
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

$(BIN)/protoc-gen-go:
	GOBIN=$(BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)

$(BIN)/protoc-gen-go-grpc:
	GOBIN=$(BIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GRPC_VERSION)

lint: $(BIN)/staticcheck
	$(GO) vet ./...
	$(BIN)/staticcheck ./...
	cd sdk && $(GO) vet ./... && $(BIN)/staticcheck ./...

proto: deps $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc
	@protoc --version | grep -q "libprotoc $(PROTOC_VERSION)" || { echo "proto: need protoc $(PROTOC_VERSION) (Debian bookworm's protobuf-compiler), found $$(protoc --version)"; exit 1; }
	PATH=$(BIN):$$PATH bash itest/scripts/proto.sh

# Everything generated, with generators pinned: protobuf (above), the CRD
# deepcopy code and OpenAPI schemas (controller-gen, pinned in
# controller/tools/go.mod), and the OVSDB models (libovsdb modelgen, the
# version in go.mod) from the reduced vswitch schema; switchyard.yml from the
# manifest parts; the configuration reference from the config types.
GENERATED := '*.pb.go' 'controller/apis/crd/v1beta1/zz_generated*' manifests/crds host/ovsdb/vswitchd \
	manifests/switchyard.yml manifests/docs/config-reference.md manifests/docs/pipeline.md

generate: proto manifests
	cd controller/apis/crd/v1beta1 && $(GO) generate ./...
	$(GO) build -o $(BIN)/modelgen github.com/ovn-org/libovsdb/cmd/modelgen
	$(BIN)/modelgen -p vswitchd -o host/ovsdb/vswitchd host/ovsdb/vswitchd/vswitch.ovsschema
	$(GO) run ./manifests/cmd/gen-config-reference -o manifests/docs/config-reference.md
	$(GO) run ./manifests/cmd/gen-pipeline-doc -o manifests/docs/pipeline.md

# Regenerates everything generated and fails if the committed copy differs.
verify: generate
	@git diff --exit-code -- $(GENERATED) || { echo "verify: generated code is stale: run 'make generate' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- $(GENERATED))" || { echo "verify: untracked generated files: run 'make generate' and commit"; exit 1; }
	@echo "verify: generated code is current"

# Docker-archive images, no Docker engine: static binaries plus Open vSwitch
# from Debian packages (cached in ~/.cache/switchyard/debs). Load them on a
# node with `ctr -n k8s.io images import bin/images/<name>-$(VERSION).tar`.
images:
	@command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || { echo "images: needs apt-get and dpkg-deb (Debian)"; exit 1; }
	$(GO) run ./manifests/cmd/build-images -version $(VERSION) -out $(BIN)/images

# switchyard.yml at the VERSION file's tag (committed; `make verify` checks
# it). For other tags: go run ./manifests/cmd/render-manifests -version V -o F
manifests:
	$(GO) run ./manifests/cmd/render-manifests -o manifests/switchyard.yml
	@if [ "$(VERSION)" != "$$(cat manifests/VERSION)" ]; then mkdir -p $(BIN) && \
		$(GO) run ./manifests/cmd/render-manifests -version $(VERSION) -o $(BIN)/switchyard-$(VERSION).yml && \
		echo "wrote $(BIN)/switchyard-$(VERSION).yml"; fi

demo: deps tools
	$(GO) run ./itest/cmd/demo $(DEMO_ARGS)

# Real kubelet + containerd nodes (itest/realnode): pods created through the
# apiserver, networked by the CNI containerd calls.
demo-kubelet: deps tools
	$(GO) run ./itest/cmd/demo --kubelet $(DEMO_ARGS)

clean-itest:
	@bash itest/scripts/clean-itest.sh

clean: clean-itest
	rm -rf $(BIN)
