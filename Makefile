# probed — see README.md. All targets run from a fresh Debian machine as root.
SHELL := /bin/bash
VERSION ?= $(shell bash hack/version.sh)
LDFLAGS := $(shell VERSION=$(VERSION) bash hack/ldflags.sh)
GO ?= go

.PHONY: all build test unit integration runtime e2e fuzz lint deps k8s-bins images clean

all: lint build

## build: every command in cmd/ (probed, probed-webhook, kubectl-probed) into bin/.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/ ./cmd/...

## test: every tier (lint, unit, fuzz smoke, integration, compat, runtime, e2e). This is what CI runs.
test:
	bash hack/test.sh all

## test-all: make test, then what it leaves out because it only measures longer
## what make test's tiers already hold: the full churn soak (make soak) and the
## full cluster scale run (make scale), and the pod sources' measurement on a
## real node (hack/test.sh measure). Hours, not CI's 45 minutes.
.PHONY: test-all
test-all:
	bash hack/test.sh all
	bash hack/test.sh soak
	bash hack/scale.sh
	bash hack/test.sh measure

unit:
	bash hack/test.sh unit

integration:
	bash hack/test.sh integration

runtime:
	bash hack/test.sh runtime

.PHONY: compat
## compat: the oldest supported minor, 1.35 by default (COMPAT_K8S; pinned in
## test/tools/k8s-<minor>/go.mod): the integration tests on the API surface
## probed uses against its kube-apiserver, the node tier's core scenarios on a
## 1.35 node, then the runtime tier's core against Debian's containerd 1.6
## (an older runtime API); in make test.
compat:
	bash hack/test.sh compat

e2e:
	bash hack/test.sh e2e

fuzz:
	bash hack/test.sh fuzz

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags integration,runtime,e2e,soak,scale,release ./test/...
	cd test/kubeletparity && $(GO) vet ./...

deps:
	bash hack/install-deps.sh

k8s-bins:
	bash hack/build-k8s.sh

images:
	bash hack/build-images.sh

clean:
	rm -rf bin

.PHONY: plugin-dist

## plugin-dist: `kubectl probed` archives for linux and darwin, amd64 and arm64,
## and their krew manifest, in .cache/dist/.
plugin-dist:
	bash hack/build-plugin.sh

.PHONY: image push demo demo-down

## image: probed's container image as .cache/images/probed.tar (probed:dev), built
## offline with umoci and skopeo; the Dockerfile builds the same with Docker.
## image: the release images, linux/amd64 and linux/arm64, as multi-arch OCI archives with
## an SBOM each, in .cache/release (REPO, WEBHOOK_REPO, TAG, ARCHES configurable).
image:
	bash hack/build-probed-image.sh --release

## push: make image's archives to a registry with skopeo, as REGISTRY/probed:TAG and
## REGISTRY/probed-webhook:TAG (every architecture); REGISTRY=host[:port][/path] is
## required, TAG defaults to make image's; PUSH_FLAGS adds skopeo flags (credentials,
## --dest-tls-verify=false for a plain-HTTP registry). See docs/install.md.
push:
	REGISTRY='$(REGISTRY)' TAG='$(TAG)' PUSH_FLAGS='$(PUSH_FLAGS)' bash hack/push-images.sh

## demo: a real single-node cluster on loopback with probed and sample workloads,
## watched for about 80 s; it keeps running until `make demo-down`.
demo:
	bash hack/demo.sh

demo-down:
	bash hack/demo-down.sh

.PHONY: bench

## bench: issue 6 benchmarks, probed's prober and worker against the kubelet's
## probing code on loopback (~15 min, writes docs/benchmarks/); BENCH_QUICK=1
## for a 2-3 minute smoke (writes .cache/bench/quick/).
bench:
	bash hack/bench.sh

.PHONY: soak

## soak: issue 8 churn soak, 2,000 pods × 3 probes created, flipped and deleted
## in waves for SOAK_DURATION (default 20m) against a real etcd + kube-apiserver;
## writes .cache/soak/result.json (SOAK_OUT). A 2-minute version runs in CI.
soak:
	bash hack/test.sh soak

scale: ; bash hack/scale.sh # issue 16: 50 simulated nodes x 30 pods, ~10 min, and TestPDBRestarts; see docs/scale.md
