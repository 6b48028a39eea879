#!/usr/bin/env bash
# Builds, ahead of time, what the later tiers of `make test` will need, so
# that their compiles overlap with the earlier tiers' waiting (tests spend
# most of their time waiting on real servers, and CI has two cores).
# hack/test.sh all starts it in the background, below the tests in CPU priority
# (in their session: see there): the tests always come first, and it only
# uses cores they leave idle.
#
# It builds nothing of its own: it runs the same scripts the tiers run, which
# are idempotent and take a lock each, so a tier that gets there first builds
# and this one then finds it done, or the tier waits for this one's build and
# then finds it done. The rest only fills Go's build cache (concurrency-safe)
# with the packages the later test binaries and release builds compile.
# Nothing here can fail a run: a failed build is built again, and reported,
# by the tier that needs it.
#
# Usage: hack/prebuild.sh [tiers|release|all]: what the tiers up to e2e need,
# what the release tier needs, or both (the default).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source hack/goenv.sh # the tiers' build settings, so their cache entries match

t0=$SECONDS
run() {
  local start=$SECONDS
  if "$@" >/dev/null 2>"$tmp/err"; then
    echo "prebuild: [$((SECONDS - t0))s] $* ($((SECONDS - start))s)"
  else
    echo "prebuild: [$((SECONDS - t0))s] $* failed after $((SECONDS - start))s (the tier that needs it builds it again):"
    tail -n 20 "$tmp/err" | sed 's/^/prebuild:   /'
  fi
}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/probed-prebuild.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
compat=${COMPAT_K8S:-1.35}
phase=${1:-all} # tiers: up to the e2e tier's; release: the release tier's; all: both

# In the order the tiers need them: integration, compat, runtime, e2e, release.
if [ "$phase" != release ]; then
run bash hack/build-k8s.sh kube-apiserver
run bash hack/helm.sh
run bash hack/build-kubectl.sh
run "${race[@]}" -tags integration -c -o "$tmp/" ./test/integration/ ./test/harness/controlplane/ ./test/harness/prometheus/
run go test -tags soak -c -o "$tmp/" ./test/soak/
run go test -tags scale -c -o "$tmp/" ./test/scale/
run bash hack/build-containerd.sh
for minor in $compat; do
  run env K8S_VERSION="$minor" bash hack/build-k8s.sh
done
run env CGO_ENABLED=0 go build -trimpath ./cmd/... ./test/workloads/...
run "${race[@]}" -tags runtime -c -o "$tmp/" ./test/runtime/
run bash hack/build-k8s.sh
run go test -tags e2e -c -o "$tmp/" ./test/e2e/ ./test/harness/node/
fi
if [ "$phase" != tiers ]; then
run go test -tags release -c -o "$tmp/" ./test/release/
run env CGO_ENABLED=0 GOARCH=arm64 go build -trimpath ./cmd/...
for arch in amd64 arm64; do
  run env CGO_ENABLED=0 GOOS=darwin GOARCH="$arch" go build -trimpath ./cmd/kubectl-probed
done
run bash hack/krew.sh
run bash hack/sbom.sh
fi
echo "prebuild: $phase done in $((SECONDS - t0))s"
