#!/usr/bin/env bash
# Runs probed's test tiers. Usage: hack/test.sh [all|lint|unit|fuzz|integration|compat|runtime|e2e|soak]...
# Every tier installs and starts what it needs: Debian packages, Kubernetes
# binaries built from Go modules (cached in .cache/), locally built images.
set -euo pipefail
cd "$(dirname "$0")/.."
tiers=("$@"); [ ${#tiers[@]} -eq 0 ] && tiers=(all)
t0=$SECONDS
step() { printf '\n==> [%dm%02ds] %s\n' $(((SECONDS - t0) / 60)) $(((SECONDS - t0) % 60)) "$*"; }
if [ "${tiers[0]}" = all ]; then
  tiers=(lint unit fuzz integration compat runtime e2e)
  # On CI's two cores the tests spend most of their time waiting on real
  # servers. So, beside the tiers and below them in CPU priority, the later
  # tiers' builds (Kubernetes twice, containerd, helm, the test binaries,
  # cross-compiles) run ahead (nice 15), and lint runs in the cores left
  # after that (nice 19); its verdict is read at the end and fails the run
  # as before. PREBUILD=0 runs everything in order instead.
  if [ "${PREBUILD:-1}" = 1 ]; then
    bash hack/install-deps.sh # apt takes one lock: before the builds start
    mkdir -p .cache
    setsid nice -n 15 bash hack/prebuild.sh >.cache/prebuild.log 2>&1 &
    prebuild=$!
    setsid nice -n 19 make -s lint >.cache/lint.log 2>&1 &
    lint=$!
    trap 'kill -- -"$prebuild" -"$lint" 2>/dev/null || true' EXIT
    tiers=(unit fuzz integration compat runtime e2e)
  fi
fi
for t in "${tiers[@]}"; do
  case "$t" in
    lint)
      step "lint: gofmt + go vet"
      make -s lint ;;
    unit)
      step "unit tests (race)"
      go test -race -count=1 -cover ./...
      # The kubelet's own pkg/probe (k8s.io/kubernetes v1.37.2, a module of
      # its own) and probed's prober against the same hostile servers.
      step "kubelet parity: pkg/probe/http and pkg/probe/grpc v1.37.2 vs pkg/prober"
      (cd test/kubeletparity && go test -count=1 ./...) ;;
    fuzz)
      step "fuzz smoke (${FUZZTIME:=20s} each)"
      go test -run='^$' -fuzz='^FuzzDeclaredProbes$' -fuzztime="$FUZZTIME" ./pkg/probespec/
      go test -run='^$' -fuzz='^FuzzAdopt$' -fuzztime="$FUZZTIME" ./pkg/probespec/
      go test -run='^$' -fuzz='^FuzzApproveReach$' -fuzztime="$FUZZTIME" ./pkg/probespec/
      go test -run='^$' -fuzz='^FuzzConvert$' -fuzztime="$FUZZTIME" ./pkg/convert/
      go test -run='^$' -fuzz='^FuzzConvertText$' -fuzztime="$FUZZTIME" ./pkg/convert/
      # A count, not a duration: its inputs can each take a probe's timeout
      # against real servers, and one still in flight when a duration ends
      # fails the run with "context deadline exceeded" on a loaded machine.
      go test -run='^$' -fuzz='^FuzzHTTPResponse$' -fuzztime="${FUZZ_HTTP_EXECS:=3000x}" ./pkg/prober/ ;;
    integration)
      step "integration tier: real etcd + kube-apiserver + Prometheus, promtool"
      bash hack/install-deps.sh
      bash hack/build-k8s.sh kube-apiserver
      # The chart's tests: helm (built from its Go module) and kubectl kustomize.
      helm_dir="$(bash hack/helm.sh)"
      PATH="$(bash hack/build-kubectl.sh):$PATH"
      step "manifests: helm lint --strict, kubectl kustomize of every kustomization"
      "$helm_dir/helm" lint --strict charts/probed
      "$helm_dir/helm" lint --strict charts/probed --set monitoring.enabled=true --set webhook.certManager.enabled=true \
        --set namespace.create=true --set namespace.name=elsewhere
      "$helm_dir/helm" lint --strict charts/probed --set webhook.enabled=false \
        --set flags.runtime-endpoint=unix:///var/run/crio/crio.sock --set flags.runtime-type=cri
      for k in $(git ls-files '*kustomization.yaml'); do
        grep -q '^kind: Component' "$k" && continue # rendered through deploy/ and the tests' wrappers
        kubectl kustomize "$(dirname "$k")" >/dev/null 2> >(grep -v "'vars' is deprecated" >&2)
      done
      go test -count=1 ./test/monitoring/
      go test -race -count=1 -tags integration -timeout 30m ./test/harness/controlplane/ ./test/harness/prometheus/ ./test/integration/...
      step "churn soak, short (300 pods, 2m; make soak runs the full one)"
      SOAK_DURATION=2m SOAK_PODS=300 SOAK_OUT="$PWD/.cache/soak/short.json" \
        go test -v -count=1 -tags soak -timeout 15m ./test/soak/
      step "cluster scale, short (10 nodes × 20 pods; fails on steady-state writes or restart flips)"
      SCALE_OUT="$PWD/.cache/scale/short.json" go test -v -count=1 -tags scale -timeout 10m ./test/scale/ ;;
    compat)
      # The oldest supported Kubernetes minor (CI: 1.35; COMPAT_K8S="1.35 1.34 1.33"
      # for the minors past their end of life, pinned in test/tools/k8s-<minor>/go.mod):
      # the integration tests of the API surface probed relies on (readiness-gate
      # conditions and container status through SSA, the confinement, probe-reach
      # and webhook CA-bundle ValidatingAdmissionPolicies (CEL authorizer, optional
      # fields), the adoption webhook, delegated authn/authz, the manifests'
      # server-side dry run) against that minor's kube-apiserver, then the node
      # tier's core scenarios on a node of that minor (apiserver,
      # controller-manager, scheduler and kubelet) with containerd 2.
      compat_tests='^(TestReadinessFollowsTarget|TestOthersConditionsUntouchedAndNoIdleWrites|TestContainerStatusMode'
      compat_tests+='|TestRBACAndNodeConfinement|TestConfinementSurvivesNamespaceAndPrefix'
      compat_tests+='|TestWebhookAdoptsPodsInScope|TestWebhookRefusesInvalidAnnotations'
      compat_tests+='|TestEndpointsAuthentication|TestChartServerSideDryRun'
      compat_tests+='|TestProbeEditNeedsExec|TestWebhookAccountChangesOnlyTheCABundle)$'
      bash hack/install-deps.sh
      bash hack/helm.sh >/dev/null
      bash hack/build-containerd.sh
      bash hack/build-images.sh
      bash hack/build-workload-images.sh
      bash hack/build-probed-image.sh
      PATH="$(bash hack/build-kubectl.sh):$PATH"
      for minor in ${COMPAT_K8S:-1.35}; do
        v="$(K8S_VERSION=$minor bash hack/build-k8s.sh --version)"
        bindir="$(K8S_VERSION=$minor bash hack/build-k8s.sh --bindir)"
        step "compat tier: integration subset against kube-apiserver $v"
        K8S_VERSION=$minor bash hack/build-k8s.sh
        PROBED_K8S_BIN_DIR="$bindir" PROBED_K8S_VERSION="$v" \
          go test -race -count=1 -tags integration -timeout 15m -run "$compat_tests" ./test/integration/
        step "compat tier: the node tier's core scenarios on a $v node (kubelet $v, containerd $(bash hack/build-containerd.sh --version))"
        PROBED_K8S_BIN_DIR="$bindir" PROBED_K8S_VERSION="$v" E2E_SKIP_IMAGE_BUILD=1 \
          go test -count=1 -tags e2e -timeout 30m -run '^TestProbing$/^scenarios$/^container$' ./test/e2e/
      done
      # An older runtime API: containerd 1.6 (Debian's), the runtime tier's
      # conformance core on every runtime client probed has.
      step "compat tier: runtime core against containerd $(/usr/bin/containerd --version | awk '{print $3}') (Debian)"
      PROBED_CONTAINERD_SYSTEM=1 go test -count=1 -tags runtime -timeout 15m \
        -run '^(TestAutoPicksContainerdCRIOnContainerd|TestExecTable|TestExecErrors|TestExecTimeout|TestStopHonoursGrace|TestLivenessKillOnHoldAndResume)$' ./test/runtime/ ;;
    runtime)
      step "runtime tier: real containerd + runc"
      bash hack/install-deps.sh
      bash hack/build-containerd.sh
      bash hack/build-images.sh
      go test -race -count=1 -tags runtime -timeout 20m ./test/runtime/... ;;
    e2e)
      step "end-to-end tier: a real node (control plane, containerd, kubelet) with probed as the DaemonSet"
      bash hack/install-deps.sh
      bash hack/build-k8s.sh
      bash hack/build-containerd.sh
      PATH="$(bash hack/build-kubectl.sh):$PATH"
      # TestChartInstall installs charts/probed with helm.
      bash hack/helm.sh >/dev/null
      # The node harness's own test deploys probed's image too; build the
      # images before both packages start (the e2e TestMain only checks them).
      bash hack/build-images.sh
      bash hack/build-workload-images.sh
      bash hack/build-probed-image.sh
      E2E_SKIP_IMAGE_BUILD=1 go test -count=1 -tags e2e -timeout 45m ./test/harness/node/ ./test/e2e/
      step "release images: make image's linux/amd64 and linux/arm64 archives and SBOMs; the amd64 images run on containerd + runc; the krew manifest through krew's own validation"
      bash hack/krew.sh >/dev/null
      go test -count=1 -tags release -timeout 15m ./test/release/ ;;
    soak)
      # Not in "all": it takes SOAK_DURATION (default 20m) plus set-up.
      d="${SOAK_DURATION:=20m}"
      case "$d" in
        *h) secs=$(( ${d%h} * 3600 )) ;; *m) secs=$(( ${d%m} * 60 )) ;; *s) secs=${d%s} ;;
        *) echo "SOAK_DURATION=$d: use whole h, m or s, e.g. 20m" >&2; exit 2 ;;
      esac
      step "churn soak: ${SOAK_PODS:=2000} pods for $d against a real etcd + kube-apiserver"
      bash hack/install-deps.sh
      bash hack/build-k8s.sh kube-apiserver
      SOAK_OUT="${SOAK_OUT:-$PWD/.cache/soak/result.json}" SOAK_DURATION="$d" SOAK_PODS="$SOAK_PODS" \
        go test -v -count=1 -tags soak -timeout "$(( secs + 900 ))s" ./test/soak/ ;;
    *) echo "unknown tier: $t" >&2; exit 2 ;;
  esac
done
if [ -n "${prebuild:-}" ]; then
  step "the builds run ahead of the tiers (.cache/prebuild.log):"
  wait "$prebuild" || true
  cat .cache/prebuild.log
  step "lint: gofmt + go vet (run beside the tiers; .cache/lint.log)"
  status=0
  wait "$lint" || status=$?
  cat .cache/lint.log
  if [ "$status" != 0 ]; then
    echo "lint failed (exit $status)" >&2
    exit "$status"
  fi
fi
