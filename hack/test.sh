#!/usr/bin/env bash
# Runs probed's test tiers. Usage: hack/test.sh [all|lint|unit|fuzz|integration|compat|runtime|e2e|soak|measure]...
# Every tier installs and starts what it needs: Debian packages, Kubernetes
# binaries built from Go modules (cached in .cache/), locally built images.
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/goenv.sh # CGO_ENABLED=0 and -trimpath, except "${race[@]}"
tiers=("$@"); [ ${#tiers[@]} -eq 0 ] && tiers=(all)
t0=$SECONDS
step() { printf '\n==> [%dm%02ds] %s\n' $(((SECONDS - t0) / 60)) $(((SECONDS - t0) % 60)) "$*"; }
# fuzz PKG TARGET EXECS: on a failure, print the inputs it wrote to
# testdata/fuzz/, which go with CI's machine otherwise.
fuzz() {
  mkdir -p .cache
  flock .cache/fuzz.lock go test -run='^$' -fuzz="^$2\$" -fuzztime="$3" "./pkg/$1/" && return
  local rc=$? f
  for f in $(git ls-files --others --exclude-standard "pkg/$1/testdata/fuzz/$2"); do
    echo "--- failing input, to keep as pkg/$1/testdata/fuzz/$2/${f##*/}:"
    cat "$f"
  done
  return $rc
}
# The background chain of "all" (below). While the e2e node runs its
# scenarios, none of it may compete with them: their pods' start-up alone
# can keep both cores busy (test/e2e's start gate paces it by CPU pressure),
# and at nice 15 the chain still takes a share from the node, whose
# containers each run in a session (autogroup) of their own. In CI, gRPC and
# exec probes then timed out for two minutes and a healthy server was
# restarted. So the chain is stopped
# (SIGSTOP) for them, and continued after. Never in the middle of a fuzz
# target, whose coordinator would take its stopped workers for hung ones:
# each target holds .cache/fuzz.lock, which stopping waits for.
pause_background() {
  [ -n "${background:-}" ] && kill -0 "$background" 2>/dev/null || return 0
  local start=$SECONDS
  flock .cache/fuzz.lock kill -STOP -- -"$background" 2>/dev/null || return 0
  paused_at=$SECONDS
  local log
  log=$(ls -t .cache/{prebuild,lint,fuzz}.log 2>/dev/null | head -n 1) || true
  echo "background chain stopped for the node's scenarios (after waiting $((paused_at - start))s for a fuzz target);" \
    "${log:-its logs}: $(tail -n 1 "$log" 2>/dev/null)"
}
resume_background() {
  [ -n "${paused_at:-}" ] || return 0
  kill -CONT -- -"$background" 2>/dev/null || true
  echo "background chain continued after $((SECONDS - paused_at))s stopped"
  paused_at=
}
# On a failure, what the chain was doing: CI keeps only this log.
background_exit() {
  local rc=$?
  if [ "$rc" != 0 ] && [ -n "${background:-}" ]; then
    for f in prebuild lint fuzz; do
      [ -s ".cache/$f.log" ] || continue
      echo "--- beside the tiers, .cache/$f.log at the failure (last 30 lines):"
      tail -n 30 ".cache/$f.log"
    done
  fi
  kill -- -"$background" 2>/dev/null || true
  kill -CONT -- -"$background" 2>/dev/null || true # a stopped job takes its TERM when continued
}
if [ "${tiers[0]}" = all ]; then
  tiers=(lint unit fuzz integration compat runtime e2e)
  # On CI's two cores the tests spend most of their time waiting on real
  # servers. So, beside the tiers and below them in CPU priority (nice 15),
  # one after the other: the builds of the tiers up to e2e (Kubernetes twice,
  # containerd, helm, the test binaries), lint, the fuzz targets that need
  # no server (counts, not durations, so a low priority does not weaken
  # them), then the release tier's builds (cross-compiles, krew, SBOMs).
  # Lint's and the fuzzing's verdicts are read at the end and fail the run
  # as before. PREBUILD=0 runs everything in order instead.
  if [ "${PREBUILD:-1}" = 1 ]; then
    bash hack/install-deps.sh # apt takes one lock: before the builds start
    mkdir -p .cache
    # Its own process group (set -m), to be stopped and killed whole, but not
    # setsid: a new session is a new scheduler autogroup, and CFS shares the
    # CPU equally between autogroups whatever their nice, so each one took as
    # much as the tests (the unit tier ran twice as long).
    rm -f .cache/{prebuild,lint,fuzz}.{log,rc}
    set -m
    {
      nice -n 15 bash hack/prebuild.sh tiers >.cache/prebuild.log 2>&1 || true
      if nice -n 15 make -s lint >.cache/lint.log 2>&1; then echo 0; else echo $?; fi >.cache/lint.rc
      if nice -n 15 bash hack/test.sh fuzz-pure >.cache/fuzz.log 2>&1; then echo 0; else echo $?; fi >.cache/fuzz.rc
      nice -n 15 bash hack/prebuild.sh release >>.cache/prebuild.log 2>&1 || true
    } </dev/null &
    background=$!
    set +m
    trap background_exit EXIT
    tiers=(unit fuzz-http integration compat runtime e2e)
  fi
fi
for t in "${tiers[@]}"; do
  case "$t" in
    lint)
      step "lint: gofmt + go vet"
      make -s lint ;;
    unit)
      step "unit tests (race)"
      "${race[@]}" -count=1 -cover ./...
      # The kubelet's own pkg/probe (k8s.io/kubernetes v1.37.2, a module of
      # its own) and probed's prober against the same hostile servers.
      step "kubelet parity: pkg/probe/http and pkg/probe/grpc v1.37.2 vs pkg/prober"
      (cd test/kubeletparity && go test -count=1 ./...) ;;
    fuzz|fuzz-pure|fuzz-http)
      # Counts, not durations: the same work however loaded the machine.
      if [ "$t" != fuzz-http ]; then
        step "fuzz smoke: the parsers (-fuzztime=${FUZZ_EXECS:=50000x} each)"
        for target in probespec:FuzzDeclaredProbes probespec:FuzzAdopt probespec:FuzzApproveReach \
          admission:FuzzAdopterPatch convert:FuzzConvert convert:FuzzConvertText; do
          fuzz "${target%%:*}" "${target#*:}" "$FUZZ_EXECS"
        done
      fi
      if [ "$t" != fuzz-pure ]; then
        # Its inputs can each take a probe's timeout against real servers,
        # and it compares with the kubelet's client: not below the tests.
        step "fuzz smoke: HTTP responses against real servers (-fuzztime=${FUZZ_HTTP_EXECS:=3000x})"
        fuzz prober FuzzHTTPResponse "$FUZZ_HTTP_EXECS"
      fi ;;
    integration)
      step "integration tier: real etcd + kube-apiserver + Prometheus, promtool"
      bash hack/install-deps.sh
      bash hack/build-k8s.sh kube-apiserver
      # The chart's tests: helm (built from its Go module) and kubectl kustomize.
      helm_dir="$(bash hack/helm.sh)"
      PATH="$(bash hack/build-kubectl.sh):$PATH"
      step "manifests: helm lint --strict, kubectl kustomize of every kustomization"
      # image.tag=dev: the chart refuses to render a tag left to its appVersion, dev.
      "$helm_dir/helm" lint --strict charts/probed --set image.tag=dev
      "$helm_dir/helm" lint --strict charts/probed --set image.tag=dev --set monitoring.enabled=true --set webhook.certManager.enabled=true \
        --set namespace.create=true --set namespace.name=elsewhere --set shadow.enabled=true --set probeTLS.podVolumes=true
      "$helm_dir/helm" lint --strict charts/probed --set image.tag=dev --set webhook.enabled=false \
        --set flags.runtime-endpoint=unix:///var/run/crio/crio.sock --set flags.runtime-type=cri
      for k in $(git ls-files '*kustomization.yaml'); do
        grep -q '^kind: Component' "$k" && continue # rendered through deploy/ and the tests' wrappers
        kubectl kustomize "$(dirname "$k")" >/dev/null 2> >(grep -v "'vars' is deprecated" >&2)
      done
      go test -count=1 ./test/monitoring/
      "${race[@]}" -count=1 -tags integration -timeout 30m ./test/harness/controlplane/ ./test/harness/prometheus/ ./test/integration/...
      step "churn soak, short (300 pods, 2m; make soak runs the full one)"
      SOAK_DURATION=2m SOAK_PODS=300 SOAK_OUT="$PWD/.cache/soak/short.json" \
        go test -v -count=1 -tags soak -timeout 15m ./test/soak/
      # TestScale only: the package's TestPDBRestarts (the --pdb-restarts proof
      # over 5 probeds, about 1 min) runs in make scale, CI's warm run being at
      # its 45 minutes.
      step "cluster scale, short (10 nodes × 20 pods; fails on steady-state writes or restart flips)"
      SCALE_OUT="$PWD/.cache/scale/short.json" go test -v -count=1 -tags scale -timeout 10m -run '^TestScale$' ./test/scale/ ;;
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
          "${race[@]}" -count=1 -tags integration -timeout 15m -run "$compat_tests" ./test/integration/
        step "compat tier: the node tier's core scenarios on a $v node (kubelet $v, containerd $(bash hack/build-containerd.sh --version))"
        PROBED_K8S_BIN_DIR="$bindir" PROBED_K8S_VERSION="$v" E2E_SKIP_IMAGE_BUILD=1 \
          go test -count=1 -tags e2e -timeout 30m -run '^TestProbing$/^scenarios$/^container$' ./test/e2e/
      done
      # An older runtime API: containerd 1.6 (Debian's), the runtime tier's
      # conformance core on every runtime client probed has.
      step "compat tier: runtime core against containerd $(/usr/bin/containerd --version | awk '{print $3}') (Debian)"
      PROBED_CONTAINERD_SYSTEM=1 go test -count=1 -tags runtime -timeout 15m \
        -run '^(TestAutoPicksContainerdCRIOnContainerd|TestExecTable|TestExecErrors|TestExecTimeout|TestStopHonoursGrace|TestLivenessKillOnHoldAndResume|TestSandboxIPs)$' ./test/runtime/ ;;
    runtime)
      step "runtime tier: real containerd + runc"
      bash hack/install-deps.sh
      bash hack/build-containerd.sh
      bash hack/build-images.sh
      # TestHostilePodCannotRunProbedOutOfMemory runs the real probed on a
      # real kube-apiserver too.
      bash hack/build-k8s.sh kube-apiserver
      "${race[@]}" -count=1 -tags runtime -timeout 20m ./test/runtime/... ;;
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
      pause_background
      E2E_SKIP_IMAGE_BUILD=1 go test -count=1 -tags e2e -timeout 45m ./test/harness/node/ ./test/e2e/
      resume_background
      step "release images: make image's linux/amd64 and linux/arm64 archives and SBOMs; the amd64 images run on containerd + runc; the krew manifest through krew's own validation"
      bash hack/krew.sh >/dev/null
      go test -count=1 -tags release -timeout 15m ./test/release/ ;;
    measure)
      # Not in "all" (make test-all runs it): measurements on the e2e tier's
      # node for the docs, which check nothing. Issue 37's pod source: the
      # delay from a container's start to probed's first probe, and the API
      # server's pods watches, with the kubelet's Pods API and with the API
      # server as probed's source (about 3 minutes with the node's start).
      step "measurement: probed's pod source, the kubelet's Pods API against the API server, on a real node"
      bash hack/install-deps.sh
      bash hack/build-k8s.sh
      bash hack/build-containerd.sh
      PATH="$(bash hack/build-kubectl.sh):$PATH"
      bash hack/build-images.sh
      bash hack/build-workload-images.sh
      bash hack/build-probed-image.sh
      E2E_SKIP_IMAGE_BUILD=1 E2E_POD_SOURCE_MEASURE="${E2E_POD_SOURCE_MEASURE:-10}" \
        go test -v -count=1 -tags e2e -timeout 20m -run '^TestPodSourceLatency$' ./test/e2e/ ;;
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
if [ -n "${background:-}" ]; then
  step "the builds run ahead of the tiers (.cache/prebuild.log):"
  wait "$background" || true
  cat .cache/prebuild.log
  failed=()
  step "lint: gofmt + go vet (run beside the tiers; .cache/lint.log)"
  cat .cache/lint.log
  [ "$(cat .cache/lint.rc 2>/dev/null)" = 0 ] || failed+=(lint)
  step "fuzz smoke: the parsers (run beside the tiers; .cache/fuzz.log)"
  cat .cache/fuzz.log
  [ "$(cat .cache/fuzz.rc 2>/dev/null)" = 0 ] || failed+=("the parsers' fuzzing")
  if [ ${#failed[@]} -gt 0 ]; then
    echo "failed beside the tiers: ${failed[*]}" >&2
    exit 1
  fi
fi
