#!/usr/bin/env bash
# Runs probed's test tiers. Usage: hack/test.sh [all|lint|unit|fuzz|integration|runtime|e2e]...
# Every tier installs and starts what it needs: Debian packages, Kubernetes
# binaries built from Go modules (cached in .cache/), locally built images.
set -euo pipefail
cd "$(dirname "$0")/.."
tiers=("$@"); [ ${#tiers[@]} -eq 0 ] && tiers=(all)
[ "${tiers[0]}" = all ] && tiers=(lint unit fuzz integration runtime e2e)

step() { printf '\n==> %s\n' "$*"; }
for t in "${tiers[@]}"; do
  case "$t" in
    lint)
      step "lint: gofmt + go vet"
      make -s lint ;;
    unit)
      step "unit tests (race)"
      go test -race -count=1 -cover ./... ;;
    fuzz)
      step "fuzz smoke (${FUZZTIME:=20s} each)"
      go test -run='^$' -fuzz='^FuzzDeclaredProbes$' -fuzztime="$FUZZTIME" ./pkg/manager/ ;;
    integration)
      step "integration tier: real etcd + kube-apiserver + Prometheus, promtool"
      bash hack/install-deps.sh
      bash hack/build-k8s.sh kube-apiserver
      go test -count=1 ./test/monitoring/
      go test -race -count=1 -tags integration -timeout 30m ./test/harness/controlplane/ ./test/harness/prometheus/ ./test/integration/... ;;
    runtime)
      step "runtime tier: real containerd + runc"
      bash hack/install-deps.sh
      bash hack/build-images.sh
      go test -race -count=1 -tags runtime -timeout 20m ./test/runtime/... ;;
    e2e)
      step "end-to-end tier: a real node (control plane, containerd, kubelet) with probed as the DaemonSet"
      bash hack/install-deps.sh
      bash hack/build-k8s.sh
      PATH="$(bash hack/build-kubectl.sh):$PATH"
      go test -count=1 -tags e2e -timeout 45m ./test/harness/node/ ./test/e2e/ ;;
    *) echo "unknown tier: $t" >&2; exit 2 ;;
  esac
done
