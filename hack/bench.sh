#!/usr/bin/env bash
# Issue 6 benchmarks: probed's pkg/prober, pkg/worker and pkg/cri against the
# kubelet's real probing code (k8s.io/kubernetes v1.37.2), on loopback only.
#
#   hack/bench.sh                  full run (~15 min): docs/benchmarks/{results.json,README.md,*.svg,profiles/}
#   BENCH_QUICK=1 hack/bench.sh    2-3 minute smoke:   .cache/bench/quick/
#
# BENCH_OUT overrides the output directory, BENCH_ARGS adds flags to the
# orchestrator (e.g. BENCH_ARGS='-only net,tw'), BENCH_SKIP_DEPS=1 skips the
# Debian packages and images that figure 6 (exec through containerd) needs.
# Needs root: network namespaces and containerd.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

quick=${BENCH_QUICK:-0}
out=${BENCH_OUT:-}
if [[ -z $out ]]; then
  if [[ $quick == 1 ]]; then out=.cache/bench/quick; else out=docs/benchmarks; fi
fi
bin=$root/.cache/bench/bin
mkdir -p "$bin" "$out"

command -v taskset >/dev/null 2>&1 ||
  echo "bench: taskset (util-linux) not found: target and prober will not be pinned to separate cores" >&2

if [[ ${BENCH_SKIP_DEPS:-0} != 1 ]]; then
  # containerd, runc, busybox images for figure 6; a failure only skips that figure.
  bash hack/install-deps.sh || echo "bench: hack/install-deps.sh failed; figure 6 may be skipped" >&2
  bash hack/build-images.sh || echo "bench: hack/build-images.sh failed; figure 6 may be skipped" >&2
  bash hack/build-containerd.sh || echo "bench: hack/build-containerd.sh failed; figure 6 may be skipped" >&2
  # etcd (install-deps) and kube-apiserver for figure 8, on the integration tier's control plane.
  bash hack/build-k8s.sh kube-apiserver || echo "bench: hack/build-k8s.sh failed; figure 8 may be skipped" >&2
fi

echo ">> building the benchmark binaries into $bin"
(cd test/bench && go build -trimpath -o "$bin/" ./cmd/bench ./cmd/target ./cmd/probed-driver ./cmd/probed-exec-driver)
# The kubelet's side, with its own go.mod (the kubelet's dependency versions)
# and the version stamp a release kubelet carries (its gRPC User-Agent).
(cd test/bench/kubelet && go build -trimpath \
  -ldflags "-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitVersion=v1.37.2" \
  -o "$bin/" ./cmd/kubelet-driver)

# probed.io/tls: CPU per HTTPS probe with verification against the
# kubelet's unverified TLS, keep-alive off and on, in the same run.
echo ">> verified TLS against unverified HTTPS probes: $out/tls-verify.txt"
go test -run '^$' -bench '^BenchmarkHTTPSProbe$' -benchtime "$([[ $quick == 1 ]] && echo 500x || echo 5000x)" -count 3 ./pkg/prober/ | tee "$out/tls-verify.txt"

# probed.io/from Pod: CPU per probe sent from inside a pod's network
# namespace against the same probe from the node, in the same run (root:
# it makes a network namespace).
echo ">> probes from inside the pod against probes from the node: $out/from-pod.txt"
go test -run '^$' -bench '^BenchmarkProbeFrom$' -benchtime "$([[ $quick == 1 ]] && echo 500x || echo 5000x)" -count 3 ./pkg/prober/ | tee "$out/from-pod.txt"

args=(-bin "$bin" -repo "$root" -out "$out")
[[ $quick == 1 ]] && args+=(-quick)
# shellcheck disable=SC2086 # BENCH_ARGS is a list of flags
exec "$bin/bench" "${args[@]}" ${BENCH_ARGS:-}
